#!/usr/bin/env bash
# Runs a local llmc cluster in the foreground: the controller, N workers and the OpenAI-compatible gateway,
# as separate processes on loopback. Ctrl-C (or any of them exiting) stops them all.
#
# Environment:
#   LLMC_MODEL    model package folder (default: a small random-weight model made with the exporter)
#   LLMC_MODELS   several package folders, space-separated, served side by side behind the one controller
#                 (overrides LLMC_MODEL); requests route by their "model", GET /v1/models lists them all
#   LLMC_WORKERS  number of workers per model (default 1; each uses LLMC_THREADS intra-op threads)
#   LLMC_THREADS  CPU threads per worker (default: all cores divided among the workers)
#   LLMC_PORT     gateway HTTP port (default 8000)
#   LLMC_API_KEYS bearer API keys the gateway requires, comma-separated (default: none; the gateway listens
#                 on 127.0.0.1 only, where it may serve without keys)
# Extra arguments go to every worker, e.g. --dtype=float32 or --max_running=16.
#
# Internal gRPC is authenticated as in a real deployment: a random cluster secret is made at start, in a file
# only this user can read, and given to every process (--cluster_secret_file); it is deleted on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
workers="${LLMC_WORKERS:-1}"
port="${LLMC_PORT:-8000}"
model="${LLMC_MODEL:-}"
read -r -a models <<<"${LLMC_MODELS:-}"
if [ ${#models[@]} -eq 0 ]; then
  [ -z "$model" ] && model="$(scripts/default-model.sh)"
  models=("$model")
fi
for package in "${models[@]}"; do
  [ -f "$package/llmc-model.json" ] || { echo "local-cluster: $package is not a model package" >&2; exit 2; }
done
total_workers=$(( workers * ${#models[@]} ))
threads="${LLMC_THREADS:-$(( $(nproc) / total_workers > 0 ? $(nproc) / total_workers : 1 ))}"

secret_dir="$(mktemp -d)"
chmod 700 "$secret_dir"
secret_file="$secret_dir/cluster-secret"
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret_file")

pids=()
stop_all() {
  trap - INT TERM EXIT
  [ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null || true
  wait || true
  rm -rf "$secret_dir"
}
trap stop_all INT TERM EXIT

build/controller/llmc-controller --listen_address=127.0.0.1:21001 --metrics_address=127.0.0.1:21081 \
  --cluster_secret_file="$secret_file" &
pids+=($!)
i=0
for package in "${models[@]}"; do
  for ((w = 0; w < workers; w++, i++)); do
    build/worker/llmc-worker --model_path="$package" --listen_address="127.0.0.1:$((21100 + i))" \
      --metrics_address="127.0.0.1:$((21200 + i))" --controller_address=127.0.0.1:21001 \
      --worker_id="worker-$i" --num_threads="$threads" --kv_cache_bytes=$((1 << 30)) \
      --cluster_secret_file="$secret_file" "$@" &
    pids+=($!)
  done
done
build/gateway/llmc-gateway --listen_address="127.0.0.1:$port" --controller_address=127.0.0.1:21001 \
  --cluster_secret_file="$secret_file" &
pids+=($!)

# Ready once every model is listed (each worker registers when its model is loaded).
names=""
for _ in $(seq 1 240); do
  if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
    names=$(curl -fsS "http://127.0.0.1:$port/v1/models" | grep -o '"id":"[^"]*"' | cut -d'"' -f4 | sort -u | paste -sd' ' -)
    [ "$(wc -w <<<"$names")" -ge ${#models[@]} ] && break
  fi
  sleep 0.5
done
name="${names%% *}"
cat <<INFO

llmc is serving '${names}' at http://127.0.0.1:${port}/v1 (${total_workers} worker(s); metrics: gateway /metrics,
controller http://127.0.0.1:21081/metrics, worker i http://127.0.0.1:2120i/metrics). Try:

  curl http://127.0.0.1:${port}/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "${name}", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'

Ctrl-C stops the cluster.
INFO
wait -n "${pids[@]}" || true
echo "local-cluster: a process exited; stopping the cluster" >&2
