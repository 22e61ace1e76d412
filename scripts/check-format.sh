#!/usr/bin/env bash
# Fails when a tracked C++ or CUDA file differs from Google style as .clang-format sets it (clang-format -i
# FILE fixes one). CI runs it after the build, which installs clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files -z '*.cc' '*.h' '*.cu' '*.cuh' | xargs -0 clang-format --dry-run -Werror
