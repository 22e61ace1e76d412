#!/usr/bin/env bash
# Installs dependencies (when missing), configures and builds llmc into build/ (or $LLMC_BUILD_DIR).
# Usage: scripts/build.sh [extra cmake -D options]
#   LLMC_SANITIZE=address,undefined|thread  builds the tests and the binaries they start with those
#       sanitizers, with clang, into build-asan/ or build-tsan/; the ASan build also has the libFuzzer
#       targets (fuzz/, run by scripts/fuzz.sh)
#   LLMC_BUILD_TARGETS="a b"                 builds only those targets
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
jobs="${LLMC_BUILD_JOBS:-$(nproc)}"
sanitize="${LLMC_SANITIZE:-}"
dir="$(scripts/build-dir.sh)"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
targets=()
configure=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ -n "$sanitize" ]; then
  # clang compiles about three times faster than GCC under the sanitizers, and has libFuzzer.
  configure+=(-DLLMC_SANITIZE="$sanitize" -DLLMC_COMPILE_CUDA_SOURCES=OFF
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
  targets=(llmc_unit_tests llmc_integration_tests llmc_grammar_tests)
  if [[ "$sanitize" == *address* ]]; then
    configure+=(-DLLMC_FUZZ=ON)
    targets+=(llmc_fuzzers)
  fi
  if [[ "$sanitize" == *thread* ]]; then
    # TSan must see absl::Mutex lock and unlock: an instrumented build of Debian's own Abseil.
    absl_tsan="$(realpath -m "$dir/third_party/absl-tsan")"
    scripts/build-tsan-abseil.sh "$absl_tsan"
    configure+=(-DCMAKE_PREFIX_PATH="$absl_tsan")
  fi
fi
[ -n "${LLMC_BUILD_TARGETS:-}" ] && read -r -a targets <<<"$LLMC_BUILD_TARGETS"
# A sanitizer folder configured earlier with GCC keeps GCC forever in its cache: start it over.
if [ -n "$sanitize" ] && [ -f "$dir/CMakeCache.txt" ] &&
  ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$dir/CMakeCache.txt"; then
  echo "build.sh: $dir was configured without clang; configuring it again" >&2
  rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
fi
if [ ! -f "$dir/CMakeCache.txt" ]; then
  cmake -S . -B "$dir" "${generator[@]}" "${configure[@]}" "$@"
elif [ $# -gt 0 ]; then
  cmake -S . -B "$dir" "$@"
fi
target_args=()
[ ${#targets[@]} -gt 0 ] && target_args=(--target "${targets[@]}")
cmake --build "$dir" -j "$jobs" "${target_args[@]}"
