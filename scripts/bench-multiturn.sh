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
threads="${LLMC_THREADS:-$(nproc)}"

[ "${BENCH_SKIP_BUILD:-0}" = 1 ] || scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
package="$(scripts/bench-package.sh bfloat16)"
bench=build/tools/bench/llmc-bench
logs="$out/logs"
mkdir -p "$logs"

bench_name=bench-multiturn
# shellcheck source=scripts/bench-cluster.sh
source scripts/bench-cluster.sh
trap stop_cluster EXIT
trap 'exit 130' INT TERM

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
