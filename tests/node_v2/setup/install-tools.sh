#!/usr/bin/env bash
# What `make node-v2` needs on the host: QEMU (software emulation, or KVM where it works),
# debootstrap for the guest's root file system, and mkfs.ext4 (e2fsprogs) for its image.
# Idempotent: a fast no-op when everything is there.
set -euo pipefail
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
if ((${#need[@]})); then
    echo "node-v2: installing ${need[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
fi
qemu-system-x86_64 --version | head -1 >&2
