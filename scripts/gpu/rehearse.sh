#!/usr/bin/env bash
# Rehearses scripts/gpu/run.sh on the CPU, in a Debian 13 root that has what the GPU machine has and nothing
# more: a compiler, CMake, ninja and a Python with PyTorch, no gRPC, Protobuf, Abseil, Boost, yaml-cpp, JSON,
# PCRE2, utf8proc or Catch2, no registry at run time, and a libtorch outside the system's folders (/opt/torch,
# as a pip wheel's is). Only CUDA is then new on the GPU machine. Prints run.sh's phases and their times.
#   scripts/gpu/rehearse.sh          (as root; LLMC_GPU_REHEARSAL_ROOT picks the folder, kept between runs;
#                                     LLMC_GPU_REHEARSAL_PREPARE_ONLY=1 only makes the root)
set -euo pipefail
cd "$(dirname "$0")/../.."
root="${LLMC_GPU_REHEARSAL_ROOT:-/var/tmp/llmc-gpu-rehearsal/root}"
mirror="${LLMC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
[ "$(id -u)" -eq 0 ] || { echo "gpu/rehearse: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
[ -d .gpu-bundle ] || scripts/gpu/fetch-bundle.sh

if [ ! -x "$root/usr/bin/cmake" ]; then
  command -v debootstrap >/dev/null || { apt-get update -q && apt-get install -y -q debootstrap; }
  mkdir -p "$root"
  [ -x "$root/usr/bin/apt-get" ] ||
    debootstrap --variant=minbase --include=ca-certificates trixie "$root" "$mirror"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  chroot "$root" /bin/bash -c 'set -e
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends build-essential cmake ninja-build python3 python3-torch \
      python3-numpy
    # libtorch-dev would bring libprotobuf-dev: its files go to /opt/torch instead, the runtime stays where
    # python3-torch put it, as a wheel keeps both in its own folder.
    cd /tmp && apt-get download -q libtorch-dev
    rm -rf /opt/torch /tmp/libtorch-dev && dpkg-deb -x libtorch-dev_*.deb /tmp/libtorch-dev && rm libtorch-dev_*.deb
    mv /tmp/libtorch-dev/usr /opt/torch
    for link in /opt/torch/lib/x86_64-linux-gnu/*.so; do
      ln -sfn "/usr/lib/x86_64-linux-gnu/$(readlink "$link")" "$link"
      ln -sfn "$link" "/opt/torch/lib/$(basename "$link")"
    done
    apt-get clean'
fi
# The runtime libraries beside the CMake files too, as in a wheel (Caffe2Targets.cmake names them there).
chroot "$root" /bin/bash -c 'for lib in /usr/lib/x86_64-linux-gnu/lib{c10,shm,torch,torch_cpu,torch_global_deps,torch_python}.so.*; do
    [ -e "/opt/torch/lib/x86_64-linux-gnu/${lib##*/}" ] || ln -s "$lib" /opt/torch/lib/x86_64-linux-gnu/
  done'
for package in libgrpc++-dev libprotobuf-dev libabsl-dev libboost-dev libyaml-cpp-dev nlohmann-json3-dev \
  libpcre2-dev libutf8proc-dev libcatch2-dev libtorch-dev curl; do
  if chroot "$root" dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    echo "gpu/rehearse: $package is installed in $root, which the GPU machine does not have" >&2
    exit 1
  fi
done

[ -n "${LLMC_GPU_REHEARSAL_PREPARE_ONLY:-}" ] && exit 0

# shellcheck source=scripts/chroot-root.sh
source scripts/chroot-root.sh
bind_host_filesystems "$root"
copy_working_tree "$root/src/llmc" build-gpu .gpu-bundle
# No registry from here on, as on the GPU machine.
rm -f "$root/etc/resolv.conf"
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  LLMC_TORCH_DIR=/opt/torch/lib/x86_64-linux-gnu/cmake/Torch /bin/bash -c 'cd /src/llmc && scripts/gpu/run.sh'
