#!/usr/bin/env bash
# What the prefix cache saves on a Qwen2-0.5B-shaped random model in bfloat16: time to first token with a
# cached 2,000-token prefix against a cold one, and the prefill tokens of an 8-turn chat with and without
# the cache. Usage: scripts/bench-prefix-cache.sh [prefix tokens, default 2000]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
package="$(scripts/bench-package.sh bfloat16)"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
build/tests/llmc_prefix_cache_bench "$package" "$@"
