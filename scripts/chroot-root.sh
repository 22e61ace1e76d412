# Sourced by the rehearsal scripts (scripts/rehearse-debian13.sh, scripts/gpu/rehearse.sh), run as root from the
# repository's root: what they do alike to a Debian root made with debootstrap.

# bind_host_filesystems ROOT: /proc, /sys, /dev and /dev/pts inside ROOT, unmounted again when the script exits.
bind_host_filesystems() {
  local root=$1 fs
  chroot_mounts=()
  trap 'for ((i = ${#chroot_mounts[@]} - 1; i >= 0; i--)); do umount -l "${chroot_mounts[i]}" 2>/dev/null || true; done' EXIT
  for fs in proc sys dev dev/pts; do
    mountpoint -q "$root/$fs" || { mount --bind "/$fs" "$root/$fs" && chroot_mounts+=("$root/$fs"); }
  done
}

# copy_working_tree DEST KEEP [PATH...]: the tree as git sees it (tracked and untracked, not ignored files) and
# the PATHs given into DEST, in place of what was there, but for DEST's entries named like the glob KEEP (build
# folders, kept between runs).
copy_working_tree() {
  local dest=$1 keep=$2
  shift 2
  mkdir -p "$dest"
  find "$dest" -mindepth 1 -maxdepth 1 ! -name "$keep" -exec rm -rf {} +
  { git ls-files -z -co --exclude-standard; if [ $# -gt 0 ]; then printf '%s\0' "$@"; fi; } | tar --null -T - -cf - |
    tar -C "$dest" -xf -
}
