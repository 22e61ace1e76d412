#!/usr/bin/env bash
# Dispatch policies on a real cluster: a controller, BENCH_WORKERS workers (one thread each) and a gateway on
# loopback, serving the Qwen2-0.5B-shaped random model in bfloat16 with prefix caching on. For each policy,
# llmc-bench sends the same multi-turn chats (a shared system prompt, then each conversation's own turns,
# each turn carrying the conversation so far). Prints, per policy, the share of prompt tokens served from
# the workers' caches (the responses' usage.prompt_tokens_details.cached_tokens) and TTFT.
#
# Usage: scripts/bench-dispatch.sh [extra llmc-bench flags]
# Environment: BENCH_POLICIES ["lottery shortest_queue prefix_aware"], BENCH_WORKERS [2],
#              BENCH_CONVERSATIONS [8], BENCH_TURNS [6], BENCH_SYSTEM_LEN words [100], BENCH_PORT [8300],
#              BENCH_OUT [build/bench-results], BENCH_SKIP_BUILD (1: use the binaries in build/)
set -euo pipefail
cd "$(dirname "$0")/.."

policies="${BENCH_POLICIES:-lottery shortest_queue prefix_aware}"
workers="${BENCH_WORKERS:-2}"
conversations="${BENCH_CONVERSATIONS:-8}"
turns="${BENCH_TURNS:-6}"
system_len="${BENCH_SYSTEM_LEN:-100}"
port="${BENCH_PORT:-8300}"
out="${BENCH_OUT:-build/bench-results}"
controller_port=$((port + 13200))

[ "${BENCH_SKIP_BUILD:-0}" = 1 ] || scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
package="$(scripts/bench-package.sh bfloat16)"
logs="$out/logs"
mkdir -p "$logs"

pids=()
stop_all() {
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 100); do  # up to 10 s for a clean exit, then force
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# start_all POLICY: the processes, then waits (bounded) until the controller lists every worker.
start_all() {
  local policy=$1
  build/controller/llmc-controller --listen_address="127.0.0.1:$controller_port" --metrics_address= \
    --dispatch_policy="$policy" --dispatch_seed=1 --heartbeat_interval=100ms >"$logs/dispatch-$policy-controller.log" 2>&1 &
  pids+=($!)
  for w in $(seq 0 $((workers - 1))); do
    build/worker/llmc-worker --model_path="$package" --listen_address="127.0.0.1:$((controller_port + 10 + w))" \
      --metrics_address= --controller_address="127.0.0.1:$controller_port" --worker_id="bench-worker-$w" \
      --num_threads=1 --kv_cache_bytes=$((512 << 20)) >"$logs/dispatch-$policy-worker-$w.log" 2>&1 &
    pids+=($!)
  done
  build/gateway/llmc-gateway --listen_address="127.0.0.1:$port" --controller_address="127.0.0.1:$controller_port" \
    >"$logs/dispatch-$policy-gateway.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do
    local ready
    ready=$(cat "$logs"/dispatch-"$policy"-worker-*.log 2>/dev/null | grep -c "engine warmed up" || true)
    if [ "$ready" -ge "$workers" ] && curl -fsS "http://127.0.0.1:$port/v1/models" 2>/dev/null | grep -q '"id"'; then
      sleep 1  # a heartbeat or two, so the controller's table has every worker
      return 0
    fi
    for pid in "${pids[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "bench-dispatch: a cluster process exited; see $logs/dispatch-$policy-*.log" >&2
        return 1
      fi
    done
    sleep 0.5
  done
  echo "bench-dispatch: the cluster did not come up within 300 s; see $logs/dispatch-$policy-*.log" >&2
  return 1
}

echo "bench-dispatch: machine $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(date -u +%F)"
echo "bench-dispatch: $workers workers, $conversations conversations x $turns turns, $system_len-word shared system prompt"
results=()
for policy in $policies; do
  start_all "$policy"
  build/tools/bench/llmc-bench --base-url="http://127.0.0.1:$port/v1" --endpoint=chat --label="$policy" \
    --num-prompts="$conversations" --turns="$turns" --shared-prefix-len="$system_len" --input-len=40 \
    --output-len=16 --ignore-eos --seed=1 --max-concurrency="$conversations" --timeout=1200s \
    --max-duration=3600s --disable-progress --output-json="$out/dispatch-$policy.json" "$@" >/dev/null
  results+=("$out/dispatch-$policy.json")
  stop_all
done
/usr/bin/python3 - "${results[@]}" <<'PY'
import json, sys
print(f"{'policy':16} {'prompt tokens':>13} {'cached':>8} {'TTFT p50 ms':>12} {'TTFT p99 ms':>12} {'failed':>7}")
for path in sys.argv[1:]:
    r = json.load(open(path))
    share = r["total_cached_tokens"] / max(1, r["total_input_tokens"])
    print(f"{r['label']:16} {r['total_input_tokens']:>13} {share:>8.1%} {r['ttft_ms']['p50']:>12.0f} "
          f"{r['ttft_ms']['p99']:>12.0f} {r.get('failed', 0):>7}")
PY
