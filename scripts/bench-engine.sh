#!/usr/bin/env bash
# Engine-level aggregate decode throughput of a Qwen2-0.5B-shaped random model in bfloat16 at 1, 4, 16 and
# 32 concurrent requests, against the same engine with one running sequence (FastChat's default worker).
# Usage: scripts/bench-engine.sh [max_tokens per request, default 32]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
package="$(scripts/bench-package.sh bfloat16)"
build/tests/llmc_engine_bench "$package" "$@"
