#!/usr/bin/env bash
# Soak test (not run by CI): a local cluster (controller, two workers, gateway) under mixed streaming load
# for MINUTES, with clients hanging up mid-stream and workers restarted every 45 s. Prints requests served,
# errors by kind and each process's resident memory after warm-up and at the end; fails on a lost or
# duplicated token, or on controller or gateway memory growing more than 10 % (tools/soak/soak.py).
# Usage: scripts/soak.sh MINUTES [extra tools/soak/soak.py options, e.g. --clients 8]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: scripts/soak.sh MINUTES [--clients N] [--restart-every SECONDS]" >&2
  exit 2
fi
minutes="$1"
shift

scripts/build.sh >/dev/null
scripts/fetch-tokenizers.sh build/third_party/tokenizers >/dev/null
model="$(scripts/default-model.sh)"
echo "soak: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; logs in build/soak/"
exec /usr/bin/python3 tools/soak/soak.py --minutes "$minutes" --build build --model "$model" "$@"
