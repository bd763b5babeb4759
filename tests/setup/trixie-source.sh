#!/usr/bin/env bash
# Add Debian trixie as an apt source pinned at priority 100 (nothing moves to trixie unless
# asked for by name or -t trixie), then refresh the package lists when that changed, or when
# apt does not actually offer trixie (`apt-cache policy` names no n=trixie release: lists
# missing or unreadable). Idempotent. Used by `make tools` (kubectl, the Go conformance policy's toolchain) and by
# tests/e2e/setup/install-runtimes.sh (containerd 1.7, the CRI api.proto).
set -euo pipefail

DEBIAN_MIRROR=http://deb.debian.org/debian
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
TRIXIE_SOURCE=/etc/apt/sources.list.d/nri-e2e-trixie.sources
TRIXIE_PIN=/etc/apt/preferences.d/nri-e2e-trixie

log() { echo "trixie-source: $*" >&2; }

[[ $(id -u) == 0 ]] || { log "ERROR: adding an apt source needs root"; exit 1; }

# Writes $2 to $1 only when the content differs; returns 0 when it changed the file.
write_if_changed() {
    if [[ -f $1 && "$(cat "$1")" == "$2" ]]; then
        return 1
    fi
    printf '%s\n' "$2" >"$1"
}

changed=0
write_if_changed "$TRIXIE_SOURCE" "$(printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: %s' \
    "$DEBIAN_MIRROR" "$DEBIAN_KEYRING")" && changed=1
write_if_changed "$TRIXIE_PIN" "$(printf 'Package: *\nPin: release n=trixie\nPin-Priority: 100')" && changed=1
offered() { apt-cache policy 2>/dev/null | grep -q 'n=trixie,'; }
if ((changed)) || ! offered; then
    log "apt-get update (trixie source added, or its lists missing)"
    apt-get update -q >/dev/null || { log "ERROR: apt-get update failed"; exit 1; }
    offered || { log "ERROR: apt offers no trixie release after apt-get update"; exit 1; }
fi
