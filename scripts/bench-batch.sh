#!/usr/bin/env bash
# llmc-batch's aggregate throughput against the engine benchmark's best aggregate, in one run on this
# machine: the Qwen2-0.5B-shaped random model in bfloat16, 64-token prompts (no shared prefixes), 32 greedy
# tokens each without stopping at EOS, at most 32 running sequences. The engine benchmark's best is its
# 32-concurrent row; llmc-batch runs 256 such requests from an OpenAI batch file.
# Usage: scripts/bench-batch.sh [number of requests, default 256]
set -euo pipefail
cd "$(dirname "$0")/.."

requests="${1:-256}"
scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
package="$(scripts/bench-package.sh bfloat16)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
build/tests/llmc_engine_bench "$package" 32 | tee "$work/engine.txt"
engine_best=$(awk '$1 ~ /^[0-9]+$/ { if ($2 > best) best = $2 } END { print best }' "$work/engine.txt")

# The engine benchmark's prompts: request r's token t is (r * 7919 + t * 104729) % 150000 + 10.
/usr/bin/python3 - "$requests" >"$work/in.jsonl" <<'PY'
import json, sys
for r in range(int(sys.argv[1])):
    prompt = [(r * 7919 + t * 104729) % 150000 + 10 for t in range(64)]
    body = {"model": "qwen2-0.5b-random-bfloat16", "prompt": prompt, "max_tokens": 32, "temperature": 0,
            "ignore_eos": True}
    print(json.dumps({"custom_id": f"r{r}", "method": "POST", "url": "/v1/completions", "body": body}))
PY
build/tools/batch/llmc-batch --model_path="$package" --input="$work/in.jsonl" --output="$work/out.jsonl" \
  --max_running=32 --max_num_batched_tokens=512 --kv_cache_bytes=$((2 << 30)) --max_model_len=4096 \
  --progress=false 2>&1 | grep '^llmc-batch:' | tee "$work/batch.txt"
batch=$(sed -n 's/.* \([0-9.]*\) generated tokens\/s$/\1/p' "$work/batch.txt")
lines=$(wc -l <"$work/out.jsonl")
ok=$(grep -c '"status_code":200' "$work/out.jsonl" || true)
echo "llmc-batch: $lines output lines, $ok answered 200"
awk -v b="$batch" -v e="$engine_best" 'BEGIN {
  printf "llmc-batch %.1f tok/s vs engine benchmark best %.1f tok/s: %.2fx (goal >= 0.90x)\n", b, e, b / e }'
