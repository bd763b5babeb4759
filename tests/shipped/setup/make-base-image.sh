#!/usr/bin/env bash
# Make the Python 3.11 base image for deploy/Dockerfile from Debian packages (debootstrap),
# because no container registry is reachable here. What python:3.11-slim gives the Dockerfile:
# `python` on PATH with venv and pip (ensurepip), apt-get, groupadd/useradd, LANG=C.UTF-8.
#
# Cached per machine: the image is tagged with a hash of this script, and the root file
# system tarball is kept under $CACHE_DIR, so a second run is a no-op. Safe to share between
# checkouts: the content depends only on this script (and the Debian archive of the day);
# concurrent runs serialise on a lock file; the tarball is written under a temporary name
# and renamed into place.
#
# Prints the image reference on stdout (pass it as --build-arg PYTHON_IMAGE=...).
# Env: NRI_SHIPPED_CACHE_DIR (default /var/cache/nri-webhook-bridge-shipped).
set -euo pipefail
CACHE_DIR=${NRI_SHIPPED_CACHE_DIR:-/var/cache/nri-webhook-bridge-shipped}
SUITE=bookworm
MIRROR=http://deb.debian.org/debian
PACKAGES=python3,python3-venv,python-is-python3,ca-certificates
KEY=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
IMAGE=localhost/nri-webhook-bridge-base/python:3.11-$SUITE-$KEY
TARBALL=$CACHE_DIR/python3.11-$SUITE-$KEY.tar

log() { echo "make-base-image: $*" >&2; }

mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/.lock"
flock 9

if podman image exists "$IMAGE"; then
    log "cached: $IMAGE"
    echo "$IMAGE"
    exit 0
fi
if [[ ! -s $TARBALL ]]; then
    root=$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")
    trap 'rm -rf "$root" "$TARBALL.tmp"' EXIT
    log "debootstrap $SUITE ($PACKAGES) into $root"
    start=$SECONDS
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >&2
    # What a slim image leaves out: apt lists and caches, docs, man pages.
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
    tar --numeric-owner --xattrs -C "$root" -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
    rm -rf "$root"
    trap - EXIT
    log "root file system made in $((SECONDS - start)) s: $TARBALL"
fi
podman import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' \
    "$TARBALL" "$IMAGE" >&2
log "imported $IMAGE"
echo "$IMAGE"
