#!/usr/bin/env bash
# Runs a libFuzzer target for SECONDS over its corpus, under ASan and UBSan, and prints a summary.
# Usage: scripts/fuzz.sh TARGET SECONDS     TARGET: one of fuzz/*_fuzzer.cc without the suffix, or "all"
#   (all targets, as many at a time as there are cores, or LLMC_FUZZ_JOBS)
# Builds build-asan/ (clang; see scripts/build.sh) when needed. New inputs go to build-asan/fuzz/corpus/TARGET,
# beside the seeds in fuzz/corpus/TARGET; a crashing input is saved in build-asan/fuzz/artifacts/TARGET/
# and the script exits non-zero. Fuzzing output is logged in build-asan/fuzz/TARGET.log.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

if [ $# -ne 2 ]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS   (targets: $(ls fuzz/*_fuzzer.cc | sed 's|fuzz/||; s|_fuzzer.cc||' | tr '\n' ' ')all)" >&2
  exit 2
fi
target="$1"
seconds="$2"
export LLMC_SANITIZE=address,undefined
dir="$(scripts/build-dir.sh)"
if [ "$target" = all ]; then
  # Every target is built first, then they run side by side, one per core (LLMC_FUZZ_JOBS), each alone in
  # its process and folders.
  LLMC_BUILD_TARGETS=llmc_fuzzers scripts/build.sh >/dev/null
  scripts/fetch-tokenizers.sh "$dir/third_party/tokenizers" >/dev/null
  export LLMC_FUZZ_BUILT=1
  jobs="${LLMC_FUZZ_JOBS:-$(nproc)}"
  status=0
  running=0
  for source in fuzz/*_fuzzer.cc; do
    if [ "$running" -ge "$jobs" ]; then
      wait -n || status=1
      running=$((running - 1))
    fi
    "$repo/scripts/fuzz.sh" "$(basename "$source" _fuzzer.cc)" "$seconds" &
    running=$((running + 1))
  done
  for ((; running > 0; running--)); do
    wait -n || status=1
  done
  exit $status
fi
if [ ! -f "fuzz/${target}_fuzzer.cc" ]; then
  echo "fuzz.sh: no target '$target' (fuzz/${target}_fuzzer.cc)" >&2
  exit 2
fi

if [ -z "${LLMC_FUZZ_BUILT:-}" ]; then
  LLMC_BUILD_TARGETS="fuzz_$target" scripts/build.sh >/dev/null
  if [ "$target" = tokenizer ]; then
    scripts/fetch-tokenizers.sh "$dir/third_party/tokenizers" >/dev/null
  fi
fi

work="$dir/fuzz/corpus/$target"
artifacts="$dir/fuzz/artifacts/$target"
log="$dir/fuzz/$target.log"
mkdir -p "$work" "$artifacts"
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
set +e
"$dir/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" "$repo/fuzz/corpus/$target" >"$log" 2>&1
status=$?
set -e

executions="$(grep -a -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
coverage="$(grep -a -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)"
corpus_size="$(find "$work" -type f | wc -l)"
echo "fuzz $target: ${seconds}s, ${executions:-?} executions, ${coverage:-no coverage line}, corpus $corpus_size new inputs, exit $status ($(lscpu | sed -n 's/^Model name: *//p' | head -1))"
if [ $status -ne 0 ]; then
  echo "fuzz $target: FAILED; the report (from $log):" >&2
  grep -a -A40 -m1 -E 'ERROR: |==[0-9]+==|runtime error|deadly signal' "$log" >&2 || tail -60 "$log" >&2
  ls "$artifacts" >&2
fi
exit $status
