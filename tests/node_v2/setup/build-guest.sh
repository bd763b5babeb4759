#!/usr/bin/env bash
# Build the cgroup v2 + systemd guest that `make node-v2` boots under QEMU.
#
# Everything comes from Debian packages, made here (no registry is reachable):
#   - a Debian trixie root file system (debootstrap; systemd 257 as PID 1, cgroup v2 only),
#     with runc 1.1 (trixie's, the old shares->weight conversion) as /usr/sbin/runc and
#     runc 1.3 (sid's, the new conversion) unpacked under /opt/runc-1.3, never installed;
#   - the CRI api.proto package (the e2e's CRI client is generated from it);
#   - a Python venv (/opt/nri-venv) with the project's dependencies from PyPI, fetched
#     in a chroot on this host (the guest itself has no network), and a .pth pointing
#     at /src, where the guest mounts the repository (9p);
#   - Debian's kernel and a trimmed initramfs (virtio + 9p only), taken out of the root
#     file system for a direct kernel boot; the kernel is never installed on the host;
#   - a raw ext4 image of the root file system made with `mkfs.ext4 -d` (no loop mount);
#     the guest boots it with -snapshot, so every boot is a clean node.
#
# Cached per machine under $CACHE_DIR/guest-<key>, where <key> hashes this script, the
# guest/ files baked into the image and pyproject.toml (the dependencies): a changed recipe
# builds a new image; older ones are removed. Concurrent runs serialise on a lock.
#
# Prints the guest directory (vmlinuz, initrd.img, rootfs.img) on stdout.
# Env: NRI_NODE_V2_CACHE_DIR (default /var/cache/nri-webhook-bridge-node-v2).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
GUEST_FILES=$HERE/../guest
CACHE_DIR=${NRI_NODE_V2_CACHE_DIR:-/var/cache/nri-webhook-bridge-node-v2}
SUITE=trixie
MIRROR=http://deb.debian.org/debian
PACKAGES=systemd,systemd-sysv,dbus,udev,kmod,python3,python3-venv,iproute2,procps,ca-certificates,runc,util-linux,less
# The guest's own PyPI installs (run in the chroot): the project's dependencies plus the
# dev tools the guest tests use. Lint and type tools stay on the host.
GUEST_DEV_DEPS=(grpcio grpcio-tools "pytest>=8" "pytest-asyncio>=0.24" "pytest-timeout>=2.3" "hypothesis>=6.100" "jsonschema>=4.22")

log() { echo "build-guest: $*" >&2; }
die() {
    echo "build-guest: ERROR: $*" >&2
    exit 1
}

recipe_key() {
    {
        cat "${BASH_SOURCE[0]}" "$REPO/pyproject.toml"
        find "$GUEST_FILES" -type f -name '*.image.*' -print0 | sort -z | xargs -0 cat
    } | sha256sum | cut -c1-16
}

KEY=$(recipe_key)
OUT=$CACHE_DIR/guest-$KEY

mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/.lock"
flock 9

if [[ -s $OUT/rootfs.img && -s $OUT/vmlinuz && -s $OUT/initrd.img && -f $OUT/complete ]]; then
    log "cached: $OUT"
    echo "$OUT"
    exit 0
fi

[[ $(id -u) == 0 ]] || die "must run as root (debootstrap, chroot)"
command -v debootstrap >/dev/null || die "debootstrap missing (tests/node_v2/setup/install-tools.sh installs it)"

root=$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")
mounted=()
cleanup() {
    local m
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null || true
    done
    rm -rf "$root" "$OUT.tmp"
}
trap cleanup EXIT

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"; }

start=$SECONDS
# The debootstrap stage alone is kept too (keyed by what it installs), so a change further
# down the recipe does not fetch the base system again.
BASE=$CACHE_DIR/base-$(printf '%s %s %s' "$SUITE" "$PACKAGES" "$MIRROR" | sha256sum | cut -c1-12).tar
if [[ -s $BASE ]]; then
    log "base system from $BASE"
    tar --numeric-owner -C "$root" -xf "$BASE"
else
    log "debootstrap $SUITE into $root"
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >"$CACHE_DIR/debootstrap.log" 2>&1 ||
        { tail -30 "$CACHE_DIR/debootstrap.log" >&2; die "debootstrap failed (log: $CACHE_DIR/debootstrap.log)"; }
    find "$CACHE_DIR" -maxdepth 1 -name 'base-*.tar' -delete
    tar --numeric-owner -C "$root" -cf "$BASE.tmp" . && mv "$BASE.tmp" "$BASE"
    log "debootstrap done in $((SECONDS - start)) s"
fi

for fs in proc sys dev; do
    mount --bind "/$fs" "$root/$fs"
    mounted+=("$root/$fs")
done
cp /etc/resolv.conf "$root/etc/resolv.conf"

# A trimmed initramfs: the direct boot needs only the virtio disk and ext4 (9p is mounted later).
mkdir -p "$root/etc/initramfs-tools/conf.d"
printf 'MODULES=list\nCOMPRESS=zstd\n' >"$root/etc/initramfs-tools/conf.d/nri-node-v2.conf"
printf '%s\n' virtio_pci virtio_blk ext4 >>"$root/etc/initramfs-tools/modules"
log "kernel, initramfs and the CRI proto"
in_root apt-get install -y -q --no-install-recommends linux-image-amd64 initramfs-tools zstd \
    golang-github-kubernetes-cri-api-dev >"$CACHE_DIR/apt.log" 2>&1 ||
    { tail -30 "$CACHE_DIR/apt.log" >&2; die "apt-get install in the guest root failed"; }

# runc 1.3 (the new shares->weight conversion) from sid, unpacked beside trixie's 1.1.
log "runc from sid (unpacked under /opt/runc-1.3)"
printf 'Types: deb\nURIs: %s\nSuites: sid\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$MIRROR" >"$root/etc/apt/sources.list.d/sid.sources"
printf 'Package: *\nPin: release n=sid\nPin-Priority: 1\n' >"$root/etc/apt/preferences.d/sid"
# The mirror serves sid's Release file past its Valid-Until at times: accept it for this
# one download (the signature is still checked).
in_root apt-get update -q -o Acquire::Check-Valid-Until=false >/dev/null
mkdir -p "$root/tmp/runc-sid"
in_root sh -c 'cd /tmp/runc-sid && apt-get download -q runc/sid' >/dev/null
rm -f "$root/etc/apt/sources.list.d/sid.sources" "$root/etc/apt/preferences.d/sid"
in_root apt-get update -q >/dev/null
mkdir -p "$root/opt/runc-1.3"
dpkg-deb -x "$root"/tmp/runc-sid/runc_*.deb "$root/opt/runc-1.3"
rm -rf "$root/tmp/runc-sid"
# (Whole outputs, first lines taken after: `| head -1` would SIGPIPE runc under pipefail.)
old=$(in_root /usr/sbin/runc --version) || die "trixie's runc does not run"
new=$(in_root /opt/runc-1.3/usr/sbin/runc --version) || die "sid's runc does not run on trixie"
old=${old%%$'\n'*}
new=${new%%$'\n'*}
[[ $old == "runc version 1.1."* ]] || die "trixie's runc is '$old', the guest expects 1.1.x"
[[ $new == "runc version 1.3."* || $new == "runc version 1.4."* ]] || die "sid's runc is '$new', the guest expects >= 1.3"
log "runc: $old (/usr/sbin/runc), $new (/opt/runc-1.3/usr/sbin/runc)"

log "python venv /opt/nri-venv (dependencies from PyPI, fetched in the chroot)"
mapfile -t deps < <(python3 - "$REPO/pyproject.toml" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
print("\n".join(project["dependencies"]))
EOF
)
# Wheels for the guest's Python are fetched by this host's pip (its index and certificate
# settings; the chroot's own pip would not trust this machine's package proxy), then
# installed offline in the chroot.
guest_py=$(in_root python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
mkdir -p "$root/tmp/wheels"
python3 -m pip download -q --only-binary=:all: --python-version "$guest_py" --implementation cp \
    -d "$root/tmp/wheels" "${deps[@]}" "${GUEST_DEV_DEPS[@]}" pip >"$CACHE_DIR/pip.log" 2>&1 ||
    { tail -30 "$CACHE_DIR/pip.log" >&2; die "pip download for Python $guest_py failed"; }
in_root python3 -m venv /opt/nri-venv
in_root /opt/nri-venv/bin/pip install -q --no-index --find-links /tmp/wheels "${deps[@]}" "${GUEST_DEV_DEPS[@]}" \
    >>"$CACHE_DIR/pip.log" 2>&1 || { tail -30 "$CACHE_DIR/pip.log" >&2; die "pip install in the guest venv failed"; }
rm -rf "$root/tmp/wheels"
site=$(in_root /opt/nri-venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo /src >"$root$site/nri-src.pth"
# The console scripts of pyproject.toml, pointing at the repository mounted at /src.
python3 - "$REPO/pyproject.toml" "$root/opt/nri-venv/bin" <<'EOF'
import os, sys, tomllib
with open(sys.argv[1], "rb") as f:
    scripts = tomllib.load(f)["project"]["scripts"]
for name, target in scripts.items():
    module, func = target.split(":")
    path = os.path.join(sys.argv[2], name)
    with open(path, "w") as out:
        out.write(f"#!/opt/nri-venv/bin/python\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
    os.chmod(path, 0o755)
EOF

log "guest configuration"
install -m 0644 "$GUEST_FILES/fstab.image.txt" "$root/etc/fstab"
install -m 0644 "$GUEST_FILES/nri-node-v2.image.service" "$root/etc/systemd/system/nri-node-v2.service"
mkdir -p "$root/src" "$root/var/cache/nri-webhook-bridge-e2e" "$root/var/lib/nri-node-v2"
echo nri-node-v2 >"$root/etc/hostname"
in_root systemctl enable nri-node-v2.service >/dev/null 2>&1
# Nothing the tests need and time at every boot under emulation.
in_root systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service \
    fstrim.timer dpkg-db-backup.timer systemd-tmpfiles-clean.timer >/dev/null 2>&1 || true
in_root passwd -d root >/dev/null

for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}"; done
mounted=()
# No network device in the guest, but containerd copies the node's resolv.conf into sandboxes.
printf '# the node-v2 guest has no network\nnameserver 127.0.0.1\n' >"$root/etc/resolv.conf"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/usr/share/doc/* "$root"/usr/share/man/*

mkdir -p "$OUT.tmp"
kernel=$(find "$root/boot" -name 'vmlinuz-*' | sort -V | tail -n 1)
[[ -n $kernel ]] || die "no kernel in the guest's /boot"
cp "$kernel" "$OUT.tmp/vmlinuz"
cp "$root/boot/initrd.img-${kernel##*/vmlinuz-}" "$OUT.tmp/initrd.img"
log "ext4 image from the root file system"
mkfs.ext4 -q -F -L nri-node-v2 -d "$root" "$OUT.tmp/rootfs.img" 8G >&2
{
    echo "key $KEY"
    echo "built $(date -u +%FT%TZ) in $((SECONDS - start)) s"
    echo "$old"
    echo "$new"
} >"$OUT.tmp/complete"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
# Older recipes' images are dead weight (an image is about 1.5 GB of sparse file).
find "$CACHE_DIR" -maxdepth 1 -name 'guest-*' ! -name "guest-$KEY" -exec rm -rf {} +
log "guest image made in $((SECONDS - start)) s: $OUT"
echo "$OUT"
