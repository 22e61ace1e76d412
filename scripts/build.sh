#!/usr/bin/env bash
# Installs dependencies (when missing), configures and builds llmc into build/ (or $LLMC_BUILD_DIR).
# Usage: scripts/build.sh [extra cmake -D options]
#   LLMC_SANITIZE=address,undefined|thread  builds with those sanitizers into build-asan/ or build-tsan/
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
jobs="${LLMC_BUILD_JOBS:-$(nproc)}"
sanitize="${LLMC_SANITIZE:-}"
dir="$(scripts/build-dir.sh)"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ ! -f "$dir/CMakeCache.txt" ]; then
  cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLMC_SANITIZE="$sanitize" "$@"
elif [ $# -gt 0 ]; then
  cmake -S . -B "$dir" "$@"
fi
cmake --build "$dir" -j "$jobs"
