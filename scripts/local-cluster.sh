#!/usr/bin/env bash
# Runs a local llmc cluster in the foreground: the controller, N workers and the OpenAI-compatible gateway,
# as separate processes on loopback. Ctrl-C (or any of them exiting) stops them all.
#
# Environment:
#   LLMC_MODEL    model package folder (default: a small random-weight model made with the exporter)
#   LLMC_WORKERS  number of workers (default 1; each uses LLMC_THREADS intra-op threads)
#   LLMC_THREADS  CPU threads per worker (default: all cores divided among the workers)
#   LLMC_PORT     gateway HTTP port (default 8000)
# Extra arguments go to every worker, e.g. --dtype=float32 or --max_running=16.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
workers="${LLMC_WORKERS:-1}"
port="${LLMC_PORT:-8000}"
threads="${LLMC_THREADS:-$(( $(nproc) / workers > 0 ? $(nproc) / workers : 1 ))}"
model="${LLMC_MODEL:-}"
[ -z "$model" ] && model="$(scripts/default-model.sh)"

pids=()
stop_all() {
  trap - INT TERM EXIT
  [ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null || true
  wait || true
}
trap stop_all INT TERM EXIT

build/controller/llmc-controller --listen_address=127.0.0.1:21001 --metrics_address=127.0.0.1:21081 &
pids+=($!)
for ((i = 0; i < workers; i++)); do
  build/worker/llmc-worker --model_path="$model" --listen_address="127.0.0.1:$((21100 + i))" \
    --metrics_address="127.0.0.1:$((21200 + i))" --controller_address=127.0.0.1:21001 \
    --worker_id="worker-$i" --num_threads="$threads" --kv_cache_bytes=$((1 << 30)) "$@" &
  pids+=($!)
done
build/gateway/llmc-gateway --listen_address="127.0.0.1:$port" --controller_address=127.0.0.1:21001 &
pids+=($!)

for _ in $(seq 1 240); do
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.5
done
name=$(curl -fsS "http://127.0.0.1:$port/v1/models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p' | head -1)
cat <<INFO

llmc is serving '${name}' at http://127.0.0.1:${port}/v1 (${workers} worker(s); metrics: gateway /metrics,
controller http://127.0.0.1:21081/metrics, worker i http://127.0.0.1:2120i/metrics). Try:

  curl http://127.0.0.1:${port}/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "${name}", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'

Ctrl-C stops the cluster.
INFO
wait -n "${pids[@]}" || true
echo "local-cluster: a process exited; stopping the cluster" >&2
