#!/usr/bin/env bash
# Builds llmc (installing dependencies when missing) and runs a local cluster in the foreground until
# Ctrl-C. Today that is the controller alone: the worker and the gateway are not built yet.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
controller_address="${LLMC_CONTROLLER_ADDRESS:-127.0.0.1:21001}"
metrics_address="${LLMC_CONTROLLER_METRICS:-127.0.0.1:21081}"

echo "llmc local cluster: controller on ${controller_address} (gRPC), metrics on http://${metrics_address}/metrics"
echo "Workers and the OpenAI gateway are not implemented yet; only the controller runs. Ctrl-C stops it."
exec build/controller/llmc-controller --listen_address="$controller_address" --metrics_address="$metrics_address" "$@"
