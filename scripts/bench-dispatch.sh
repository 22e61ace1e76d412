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

bench_name=bench-dispatch
worker_port=$((port + 13210))
threads=1
cluster_workers=$workers
# shellcheck source=scripts/bench-cluster.sh
source scripts/bench-cluster.sh
trap stop_cluster EXIT
trap 'exit 130' INT TERM

echo "bench-dispatch: machine $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(date -u +%F)"
echo "bench-dispatch: $workers workers, $conversations conversations x $turns turns, $system_len-word shared system prompt"
results=()
for policy in $policies; do
  controller_flags=(--dispatch_policy="$policy" --dispatch_seed=1 --heartbeat_interval=100ms)
  start_cluster "dispatch-$policy"
  build/tools/bench/llmc-bench --base-url="http://127.0.0.1:$port/v1" --endpoint=chat --label="$policy" \
    --num-prompts="$conversations" --turns="$turns" --shared-prefix-len="$system_len" --input-len=40 \
    --output-len=16 --ignore-eos --seed=1 --max-concurrency="$conversations" --timeout=1200s \
    --max-duration=3600s --disable-progress --output-json="$out/dispatch-$policy.json" "$@" >/dev/null
  results+=("$out/dispatch-$policy.json")
  stop_cluster
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
