#!/usr/bin/env bash
# Forward step time of a Qwen2-0.5B-shaped random model (hidden 896, 24 layers, 14 heads, 2 KV heads,
# FFN 4864, vocab 151,936, tied) in float32 and bfloat16, through the C++ loader and operators, against the
# weight-bandwidth limit measured in the same run.
# Usage: scripts/bench-model.sh [extra llmc_model_bench packages]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
packages=("$(scripts/bench-package.sh float32)" "$(scripts/bench-package.sh bfloat16)")
build/tests/llmc_model_bench "${packages[@]}" "$@"
