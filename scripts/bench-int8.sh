#!/usr/bin/env bash
# int8 (and int4) weights against bfloat16 on the Qwen2-0.5B-shaped random model, in one run on this machine:
#   1. resident memory of a real llmc-worker (no controller, loopback only) serving the bfloat16 package, the
#      int8 package, the int4 package (groups of 128), and the bfloat16 package quantized at load
#      (--quantization=int8, int4), once warmed up;
#   2. forward step times of the packages, the int8 one as served by default (int16 activations below 8 rows,
#      int8 from there) and with int16 or int8 activations throughout (--quantization=w8a16, w8a8), and the
#      int4 one as served (W4A8 on AVX512-VNNI, else W4A16), taking turns in every run (llmc_model_bench:
#      decode b=1..32, prefill 512 and 2000);
#   3. how close w8a16 and w8a8 stay to bfloat16 over 512 tokens of real text (llmc_quantization_bench: KL,
#      top-1).
# Usage: scripts/bench-int8.sh
# Environment: LLMC_THREADS (worker and bench threads, default all cores), BENCH_SKIP_BUILD=1,
# BENCH_LARGER_MODEL=1 (memory at the Qwen2-1.5B shape too: bfloat16, int8, int4).
set -euo pipefail
cd "$(dirname "$0")/.."

[ "${BENCH_SKIP_BUILD:-0}" = 1 ] || scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
threads="${LLMC_THREADS:-$(nproc)}"
bf16="$(scripts/bench-package.sh bfloat16)"
int8="$(scripts/bench-package.sh bfloat16 int8)"
int4="$(scripts/bench-package.sh bfloat16 int4)"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads"
echo "model files: bfloat16 $(du -m "$bf16/model.pt" | cut -f1) MB, int8 $(du -m "$int8/model.pt" | cut -f1) MB," \
  "int4 $(du -m "$int4/model.pt" | cut -f1) MB"

# worker_memory LABEL PACKAGE [flags]: VmRSS and VmHWM of a warmed-up worker, then stops it.
logs=$(mktemp -d)
worker_pid=""
trap '[ -n "$worker_pid" ] && kill -KILL "$worker_pid" 2>/dev/null; rm -rf "$logs"' EXIT
worker_memory() {
  local label=$1 package=$2
  shift 2
  build/worker/llmc-worker --model_path="$package" --listen_address=127.0.0.1:0 --metrics_address= \
    --controller_address= --num_threads="$threads" --kv_cache_bytes=$((64 << 20)) "$@" >"$logs/$label.log" 2>&1 &
  worker_pid=$!
  for _ in $(seq 1 600); do  # up to 60 s to load and warm up
    grep -q "engine warmed up" "$logs/$label.log" && break
    kill -0 "$worker_pid" 2>/dev/null || { cat "$logs/$label.log"; exit 1; }
    sleep 0.1
  done
  grep -q "engine warmed up" "$logs/$label.log" || { echo "$label: worker did not warm up"; exit 1; }
  local rss hwm anon
  rss=$(awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/$worker_pid/status")
  hwm=$(awk '/^VmHWM/ {print int($2 / 1024)}' "/proc/$worker_pid/status")
  anon=$(awk '/^RssAnon/ {print int($2 / 1024)}' "/proc/$worker_pid/status")
  kill -TERM "$worker_pid"
  wait "$worker_pid" 2>/dev/null || true
  worker_pid=""
  printf '%-40s %10s MB %14s MB %12s MB\n' "$label" "$rss" "$hwm" "$anon"
  eval "rss_$label=$rss"
  eval "anon_$label=$anon"
}
# Anonymous: resident less the pages of files mapped from disk (shared libraries), which are page cache.
printf '%-40s %13s %17s %15s\n' "worker serving" "resident" "peak resident" "anonymous"
worker_memory bf16 "$bf16"
worker_memory int8 "$int8"
worker_memory int8_at_load "$bf16" --quantization=int8
worker_memory w8a8 "$int8" --quantization=w8a8
worker_memory int4 "$int4"
worker_memory int4_at_load "$bf16" --quantization=int4
awk -v a="$rss_int8" -v b="$rss_bf16" -v c="$rss_int8_at_load" -v d="$rss_w8a8" \
  'BEGIN {printf "resident int8 / bfloat16: %.3f (package), %.3f (quantized at load), %.3f (w8a8)\n", a / b, c / b, d / b}'
awk -v a="$rss_int4" -v b="$rss_bf16" -v c="$rss_int4_at_load" \
  'BEGIN {printf "resident int4 / bfloat16: %.3f (package), %.3f (quantized at load)\n", a / b, c / b}'
awk -v a="$anon_int8" -v b="$anon_bf16" 'BEGIN {printf "anonymous int8 / bfloat16: %.3f (package)\n", a / b}'
# The same pair at the next Qwen2 size, where the weights outweigh the process's fixed part (libraries, heap,
# the 64 MiB KV cache); its packages take 4.4 GB of disk and minutes to export, so only on request.
if [ "${BENCH_LARGER_MODEL:-0}" = 1 ]; then
  worker_memory bf16_1_5b "$(scripts/bench-package.sh bfloat16 none qwen2-1.5b)"
  worker_memory int8_1_5b "$(scripts/bench-package.sh bfloat16 int8 qwen2-1.5b)"
  worker_memory int4_1_5b "$(scripts/bench-package.sh bfloat16 int4 qwen2-1.5b)"
  awk -v a="$rss_int8_1_5b" -v b="$rss_bf16_1_5b" -v c="$rss_int4_1_5b" \
    'BEGIN {printf "resident at the Qwen2-1.5B shape: int8 / bfloat16 %.3f, int4 / bfloat16 %.3f (packages)\n", a / b, c / b}'
fi
echo
build/tests/llmc_model_bench "$bf16" "$int8" "$int8:w8a16" "$int8:w8a8" "$int4"
echo
build/tests/llmc_quantization_bench "$bf16" "$int8"
