#!/usr/bin/env bash
# Installs the npm packages the deployment tests (tests/deploy/) use: kubernetes-models (Kubernetes
# schemas, to validate the rendered manifests), dockerfile-utils (the Dockerfile linter) and yaml (to
# read kubectl's and the binaries' YAML). Idempotent.
# Usage: scripts/fetch-deploy-tools.sh [DEST]   (default: build/third_party/deploy-tools)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$repo/build/third_party/deploy-tools}"
packages=(kubernetes-models@4.5.1 dockerfile-utils@0.16.3 yaml@2.9.1)

have_all=true
for name in kubernetes-models dockerfile-utils yaml; do
  [ -s "$dest/node_modules/$name/package.json" ] || have_all=false
done
if ! $have_all; then
  mkdir -p "$dest"
  npm install --no-audit --no-fund --no-save --loglevel=error --prefix "$dest" "${packages[@]}" >/dev/null
fi
echo "deploy tools: $dest/node_modules/{kubernetes-models,dockerfile-utils,yaml}"
