#!/usr/bin/env bash
# Builds llmc and runs its whole suite (the README's test command) inside a Debian 13 (trixie) root made here
# with debootstrap: libtorch 2.6, python3-torch 2.6, Catch2 3, GCC 14, Abseil 2024, as a fresh 2026 machine has them.
# Rerunnable: the root and its build folder are kept, the working tree is copied in again each time.
#   scripts/rehearse-debian13.sh [ctest arguments]     (as root; LLMC_DEBIAN13_ROOT picks the folder)
#   LLMC_DEBIAN13_SHELL=1 scripts/rehearse-debian13.sh  a shell in the root instead of the suite
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
root="${LLMC_DEBIAN13_ROOT:-/var/tmp/llmc-debian13/root}"
mirror="${LLMC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
if [ "$(id -u)" -ne 0 ]; then
  echo "rehearse-debian13: needs root (debootstrap, chroot, mounts)" >&2
  exit 2
fi
phase() { echo "rehearse-debian13: $1 ($((SECONDS - phase_started)) s)"; phase_started=$SECONDS; }
phase_started=$SECONDS

if [ ! -x "$root/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || { apt-get update -q && apt-get install -y -q debootstrap; }
  mkdir -p "$root"
  debootstrap --variant=minbase --include=ca-certificates trixie "$root" "$mirror"
  phase "Debian 13 root made in $root"
fi
# The host's way to the registries (name server, pinned hosts, local CA certificates, npm's settings), so apt
# and npm inside reach what the host reaches.
cp /etc/resolv.conf /etc/hosts "$root/etc/"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1 || true
fi
[ -f "$HOME/.npmrc" ] && cp "$HOME/.npmrc" "$root/root/.npmrc"

# shellcheck source=scripts/chroot-root.sh
source scripts/chroot-root.sh
bind_host_filesystems "$root"
copy_working_tree "$root/src/llmc" 'build*'
phase "working tree copied"

if [ -n "${LLMC_DEBIAN13_SHELL:-}" ]; then
  chroot "$root" /bin/bash -c "cd /src/llmc && exec bash -i"
  exit
fi
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  LLMC_BUILD_JOBS="${LLMC_BUILD_JOBS:-$(nproc)}" /bin/bash -c '
    set -euo pipefail
    cd /src/llmc
    . /etc/os-release
    echo "rehearse-debian13: inside $PRETTY_NAME"
    scripts/install-deps.sh
    echo "rehearse-debian13: libtorch $(dpkg-query -W -f="\${Version}" libtorch-dev), python3-torch" \
      "$(dpkg-query -W -f="\${Version}" python3-torch), Catch2 $(dpkg-query -W -f="\${Version}" catch2)," \
      "g++ $(g++ -dumpfullversion)"
    scripts/test.sh "$@"' rehearse "$@"
phase "suite run in Debian 13"
