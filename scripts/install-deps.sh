#!/usr/bin/env bash
# Installs everything llmc needs to build, test and benchmark on Debian 12 (bookworm) or 13 (trixie).
# Idempotent and non-interactive; run as root or with sudo available.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config ccache git clang-format
  # sanitizer builds and libFuzzer (scripts/test.sh with LLMC_SANITIZE, scripts/fuzz.sh)
  clang libclang-rt-dev
  # RPC and base libraries
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  libabsl-dev libboost-dev libboost-system-dev libyaml-cpp-dev nlohmann-json3-dev
  libpcre2-dev libutf8proc-dev prometheus-cpp-dev
  # models: libtorch for C++, torch for the Python exporter, a fast BLAS for float32
  libtorch-dev python3-torch python3-numpy libopenblas0-openmp
  # tests and tools (python3-jinja2: the reference renderer for the chat-template parity test;
  # python3-jsonschema and python3-rfc3987: the JSON Schema validator and its uri format checker that judge
  # the grammar engine's schema corpus; openssl: the certificates of the internal TLS test)
  catch2 curl openssl python3-jinja2 python3-jsonschema python3-rfc3987
  # headless browser for the web chat page test (driven by puppeteer-core from npm)
  chromium
)

# Node.js runs the reference tokenizers in tests. Some images ship a Node.js build that bundles npm
# and conflicts with Debian's npm package, so only ask for what is missing.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
# kubectl renders the Kubernetes manifests in tests (Debian's package, when none is installed).
command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
