#!/usr/bin/env bash
# Multi-turn chat through the gateway, with and without the workers' prefix cache: llmc-bench sends
# BENCH_CONVERSATIONS conversations of 8 turns (a shared system prompt, 60-word user messages, 32-token
# answers; each turn carries the conversation so far and goes once the previous answer is in) to a local
# cluster serving the Qwen2-0.5B-shaped random model in bfloat16, once per setting. Prints the prompt tokens
# the worker computed (prompt tokens − cached tokens, from the responses' usage) and the ratio.
#
# Usage: scripts/bench-multiturn.sh [extra llmc-bench flags]
# Environment: BENCH_CONVERSATIONS [4], BENCH_TURNS [8], BENCH_SYSTEM_LEN words [200], BENCH_PORT [8100],
#              BENCH_OUT [build/bench-results], BENCH_SKIP_BUILD (1: use the binaries in build/)
set -euo pipefail
cd "$(dirname "$0")/.."

conversations="${BENCH_CONVERSATIONS:-4}"
turns="${BENCH_TURNS:-8}"
system_len="${BENCH_SYSTEM_LEN:-200}"
port="${BENCH_PORT:-8100}"
out="${BENCH_OUT:-build/bench-results}"
controller_port=$((port + 13200))
worker_port=$((port + 13210))

[ "${BENCH_SKIP_BUILD:-0}" = 1 ] || scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
package="$(scripts/bench-package.sh bfloat16)"
bench=build/tools/bench/llmc-bench
logs="$out/logs"
mkdir -p "$logs"

pids=()
stop_cluster() {
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 100); do  # up to 10 s for a clean exit, then force
      alive=0
      for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
      [ "$alive" = 0 ] && break
      sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  pids=()
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM

# start_cluster NAME [worker flags...]: waits (bounded) until the gateway lists the model.
start_cluster() {
  local name=$1
  shift
  build/controller/llmc-controller --listen_address="127.0.0.1:$controller_port" \
    --metrics_address="127.0.0.1:$((controller_port + 80))" >"$logs/$name-controller.log" 2>&1 &
  pids+=($!)
  build/worker/llmc-worker --model_path="$package" --listen_address="127.0.0.1:$worker_port" \
    --metrics_address="127.0.0.1:$((worker_port + 80))" --controller_address="127.0.0.1:$controller_port" \
    --worker_id="bench-worker" --num_threads="$(nproc)" --kv_cache_bytes=$((1 << 30)) "$@" \
    >"$logs/$name-worker.log" 2>&1 &
  pids+=($!)
  build/gateway/llmc-gateway --listen_address="127.0.0.1:$port" \
    --controller_address="127.0.0.1:$controller_port" >"$logs/$name-gateway.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do
    curl -fsS "http://127.0.0.1:$port/v1/models" 2>/dev/null | grep -q '"id"' && return 0
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null || { echo "bench-multiturn: a cluster process exited; see $logs/$name-*.log" >&2; return 1; }
    done
    sleep 0.5
  done
  echo "bench-multiturn: the cluster did not serve the model within 300 s" >&2
  return 1
}

echo "bench-multiturn: machine $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
echo "bench-multiturn: $conversations conversations x $turns turns, $system_len-word shared system prompt"
for cache in true false; do
  name="prefix-cache-$cache"
  start_cluster "$name" --enable_prefix_caching="$cache"
  "$bench" --base-url="http://127.0.0.1:$port/v1" --endpoint=chat --label="$name" \
    --num-prompts="$conversations" --turns="$turns" --shared-prefix-len="$system_len" --input-len=60 \
    --output-len=32 --ignore-eos --seed=1 --max-concurrency="$conversations" --timeout=1200s \
    --max-duration=3600s --disable-progress --output-json="$out/multiturn-$name.json" "$@" |
    grep -E "Successful|Failed|input tokens|Input tokens|TTFT" || true
  stop_cluster
done
/usr/bin/python3 - "$out/multiturn-prefix-cache-true.json" "$out/multiturn-prefix-cache-false.json" <<'PY'
import json, sys
computed = []
for path in sys.argv[1:]:
    r = json.load(open(path))
    computed.append(r["total_input_tokens"] - r["total_cached_tokens"])
    print(f"bench-multiturn: {r['label']}: {r['total_input_tokens']} prompt tokens, {r['total_cached_tokens']} cached, "
          f"{computed[-1]} computed, mean TTFT {r['ttft_ms']['mean']:.0f} ms")
print(f"bench-multiturn: prompt tokens computed with / without the prefix cache = {computed[0] / computed[1]:.3f}x")
PY
