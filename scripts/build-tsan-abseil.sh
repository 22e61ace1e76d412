#!/usr/bin/env bash
# Builds Debian's own Abseil (the version libabsl-dev holds, from its Debian source package) with
# ThreadSanitizer into PREFIX, as shared libraries with the same names and options as Debian's.
# absl::Mutex, which llmc and gRPC lock with, is implemented inside Abseil: uninstrumented, TSan sees none
# of its locking and reports every access it guards. The TSan build links and runs against this copy.
# Usage: scripts/build-tsan-abseil.sh PREFIX   (does nothing when PREFIX already holds this version)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$(realpath -m "$1")"
version="$(dpkg-query -W -f='${Version}' libabsl-dev)"
if [ -f "$prefix/.version" ] && [ "$(cat "$prefix/.version")" = "$version" ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
# Source packages come from the same Debian mirrors as the binary ones.
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -rqs '^deb-src' /etc/apt/sources.list*; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
      $SUDO tee /etc/apt/sources.list.d/llmc-deb-src.sources >/dev/null
  else
    grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | sed -e 's/^deb /deb-src /' |
      $SUDO tee /etc/apt/sources.list.d/llmc-deb-src.list >/dev/null
  fi
  $SUDO apt-get update -q
fi

work="$prefix.src"
rm -rf "$work" "$prefix"
mkdir -p "$work"
(cd "$work" && apt-get source -q --download-only "abseil=$version" >/dev/null && dpkg-source -x ./*.dsc absl >/dev/null)
# Line tables (-g1) name every frame of a report; -O1 keeps the build to a couple of minutes on 2 cores.
cmake -S "$work/absl" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_STANDARD=17 \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF -DABSL_PROPAGATE_CXX_STD=ON \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
cmake --build "$work/build" -j "${LLMC_BUILD_JOBS:-$(nproc)}"
cmake --install "$work/build" >/dev/null
rm -rf "$work"
echo "$version" >"$prefix/.version"
