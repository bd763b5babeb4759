#!/usr/bin/env bash
# Install what the real-containerd e2e tests need. Idempotent: a fast no-op when done.
#
#   - containerd 1.7.24 from Debian trixie (apt source pinned at priority 100, so nothing
#     else moves to trixie), runc and busybox-static from bookworm, the CRI api.proto
#     (golang-github-kubernetes-cri-api-dev, trixie-only, its dependencies from bookworm);
#   - containerd 2.1.9 from Debian sid (forky if sid moved on), downloaded and extracted
#     into the cache dir, never installed (the source exists only for the download);
#   - OCI image-layout tarballs of a static pause image and a busybox image.
#
# Every apt plan is simulated first; a plan that upgrades an installed package to a
# non-bookworm version, touches a core library, or removes anything is refused.
#
# Env: NRI_E2E_CACHE_DIR (default /var/cache/nri-webhook-bridge-e2e).
set -euo pipefail

CACHE_DIR=${NRI_E2E_CACHE_DIR:-/var/cache/nri-webhook-bridge-e2e}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

CONTAINERD17_VERSION=1.7.24
CONTAINERD21_VERSION=2.1.9
CONTAINERD21_DIR=$CACHE_DIR/containerd-$CONTAINERD21_VERSION
IMAGES_DIR=$CACHE_DIR/images
CRI_PROTO=/usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto

DEBIAN_MIRROR=http://deb.debian.org/debian
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# Exists only while containerd 2.1.9 is downloaded (from sid, or forky as a fallback).
TEMP_SOURCE=/etc/apt/sources.list.d/nri-e2e-temp.sources
TEMP_PIN=/etc/apt/preferences.d/nri-e2e-temp
# Libraries whose upgrade would move the whole system; never acceptable here.
CORE_LIBS_RE='^(libc6|libc-bin|libc6-dev|libstdc\+\+6|libgcc-s1|libssl3|libsystemd0|libudev1|libzstd1|libseccomp2|libselinux1|dpkg|apt|base-files)$'

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-q -o Dpkg::Options::=--force-confold -o Dpkg::Options::=--force-confdef)

log() { echo "install-runtimes: $*" >&2; }
die() {
    echo "install-runtimes: ERROR: $*" >&2
    exit 1
}

installed_version() {
    dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null |
        awk '$3 == "installed" { print $4 }'
}

# Writes $2 to $1 only when the content differs; returns 0 when it changed the file.
write_if_changed() {
    if [[ -f $1 && "$(cat "$1")" == "$2" ]]; then
        return 1
    fi
    printf '%s\n' "$2" >"$1"
}

deb822_source() { # suite
    printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s' \
        "$DEBIAN_MIRROR" "$1" "$DEBIAN_KEYRING"
}

apt_pin() { # suite priority
    printf 'Package: *\nPin: release n=%s\nPin-Priority: %s' "$1" "$2"
}

# Simulates `apt-get install ARGS...` and refuses plans that would move the system.
check_plan() {
    local plan bad core
    plan=$(apt-get install -s --no-install-recommends "$@" 2>&1) || {
        printf '%s\n' "$plan" >&2
        die "apt cannot plan: apt-get install $*"
    }
    # "Inst pkg [old] (new Origin:release ...)" is an upgrade; bookworm origins are fine.
    bad=$(grep -E '^Inst \S+ \[' <<<"$plan" | grep -vE '\((\S+) (Debian|Debian-Security):12[ ./]' || true)
    bad+=$(grep -E '^Remv ' <<<"$plan" || true)
    core=$(grep -E '^(Inst \S+ \[|Remv )' <<<"$plan" | awk '{print $2}' | grep -E "$CORE_LIBS_RE" || true)
    if [[ -n $bad || -n $core ]]; then
        printf '%s\n' "$plan" >&2
        die "refusing apt plan for '$*': it would upgrade/remove installed packages" \
            "(core libraries: ${core:-none}; non-bookworm upgrades or removals: ${bad:-none})"
    fi
}

# Installs; on failure (typically stale lists: a package moved on the mirror) updates
# the lists, re-checks the plan and tries once more.
apt_install() {
    apt-get install -y --no-install-recommends "${APT_OPTS[@]}" "$@" >/dev/null && return
    log "apt-get install $* failed; apt-get update and retry"
    apt-get update -q >/dev/null || die "apt-get update failed"
    check_plan "$@"
    apt-get install -y --no-install-recommends "${APT_OPTS[@]}" "$@" >/dev/null ||
        die "apt-get install $* failed"
}

apt_packages_ready() {
    [[ $(installed_version containerd) == "$CONTAINERD17_VERSION"~* ]] &&
        [[ -n $(installed_version runc) ]] &&
        [[ -n $(installed_version busybox-static) ]] &&
        [[ -f $CRI_PROTO ]] &&
        command -v gcc >/dev/null
}

ensure_apt_packages() {
    if apt_packages_ready; then
        log "apt packages present (containerd $(installed_version containerd), runc $(installed_version runc))"
        return
    fi
    # The trixie source, pinned at priority 100 (the same files make tools writes).
    bash "$HERE/../../setup/trixie-source.sh" || die "cannot add the Debian trixie apt source"

    # containerd from trixie; runc pinned to bookworm (trixie's runc pulls in a newer libc6).
    local core=(-t trixie containerd runc/bookworm busybox-static/bookworm)
    command -v gcc >/dev/null || core+=(gcc/bookworm libc6-dev/bookworm)
    check_plan "${core[@]}"
    log "installing containerd $CONTAINERD17_VERSION (trixie), runc and busybox-static (bookworm)"
    apt_install "${core[@]}"

    # The CRI api.proto package exists only in trixie; its dependencies resolve from bookworm.
    local proto=(golang-github-kubernetes-cri-api-dev/trixie)
    check_plan "${proto[@]}"
    apt_install "${proto[@]}"

    apt_packages_ready || die "packages installed but not as expected:" \
        "containerd='$(installed_version containerd)' (want $CONTAINERD17_VERSION~*)," \
        "runc='$(installed_version runc)', CRI proto at $CRI_PROTO: $([[ -f $CRI_PROTO ]] && echo yes || echo no)"
    # We run our own containerd with a private config; the packaged service must stay off.
    if [[ -d /run/systemd/system ]]; then
        systemctl disable --now containerd.service >/dev/null 2>&1 || true
    fi
}

verify_containerd17() {
    local out
    out=$(/usr/bin/containerd --version 2>&1) || die "/usr/bin/containerd does not run: $out"
    [[ $out == *" $CONTAINERD17_VERSION"* || $out == *" v$CONTAINERD17_VERSION"* ]] ||
        die "/usr/bin/containerd reports '$out', want $CONTAINERD17_VERSION"
}

containerd21_ready() {
    "$CONTAINERD21_DIR/usr/bin/containerd" --version 2>/dev/null | grep -qE " v?$CONTAINERD21_VERSION([+~ ]|$)"
}

remove_temp_source() {
    if [[ -f $TEMP_SOURCE || -f $TEMP_PIN ]]; then
        rm -f "$TEMP_SOURCE" "$TEMP_PIN"
        log "temporary source removed; apt-get update"
        apt-get update -q >/dev/null || log "warning: apt-get update after removing it failed"
    fi
}

# Downloads containerd/<suite> into <dir> when that suite has CONTAINERD21_VERSION.
download_from_suite() { # suite dir
    # Priority 1: the suite is used only when asked for by name, never for an install.
    write_if_changed "$TEMP_SOURCE" "$(deb822_source "$1")" || true
    write_if_changed "$TEMP_PIN" "$(apt_pin "$1" 1)" || true
    log "apt-get update (temporary $1 source)"
    apt-get update -q >/dev/null || die "apt-get update with $1 failed"
    local candidate
    candidate=$(apt-cache show "containerd/$1" 2>/dev/null | awk '/^Version:/ { print $2; exit }')
    if [[ $candidate != "$CONTAINERD21_VERSION"* ]]; then
        log "$1 has containerd '${candidate:-none}', not $CONTAINERD21_VERSION"
        remove_temp_source
        return 1
    fi
    (cd "$2" && apt-get download -q "containerd/$1" >/dev/null) ||
        die "apt-get download containerd/$1 failed"
    remove_temp_source
}

ensure_containerd21() {
    if containerd21_ready; then
        log "containerd $CONTAINERD21_VERSION present in $CONTAINERD21_DIR"
        return
    fi
    local work suite
    work=$(mktemp -d)
    # apt downloads as its sandbox user _apt, which must be able to write here.
    if id _apt >/dev/null 2>&1; then chown _apt "$work"; fi
    # The temporary source must never outlive this function, even when a step fails.
    trap 'remove_temp_source; rm -rf "$work"' EXIT
    # sid first; testing (forky) carried the same build when sid moved on.
    for suite in sid forky ""; do
        [[ -n $suite ]] || die "no Debian suite (sid, forky) has containerd $CONTAINERD21_VERSION any more"
        download_from_suite "$suite" "$work" && break
    done

    local deb version
    deb=$(ls "$work"/containerd_*.deb)
    version=$(dpkg-deb -f "$deb" Version)
    [[ $version == "$CONTAINERD21_VERSION"* ]] ||
        die "downloaded containerd $version, the e2e pins $CONTAINERD21_VERSION"
    rm -rf "$CONTAINERD21_DIR.tmp"
    mkdir -p "$CONTAINERD21_DIR.tmp"
    dpkg-deb -x "$deb" "$CONTAINERD21_DIR.tmp"
    rm -rf "$CONTAINERD21_DIR"
    mv "$CONTAINERD21_DIR.tmp" "$CONTAINERD21_DIR"
    rm -rf "$work"
    trap - EXIT
    containerd21_ready || die "extracted containerd does not run or is not $CONTAINERD21_VERSION:" \
        "$("$CONTAINERD21_DIR/usr/bin/containerd" --version 2>&1)"
}

verify_containerd21() {
    local bin=$CONTAINERD21_DIR/usr/bin
    "$bin/ctr" --version >/dev/null 2>&1 || die "$bin/ctr does not run"
    "$bin/containerd-shim-runc-v2" -v >/dev/null 2>&1 || die "$bin/containerd-shim-runc-v2 does not run"
}

ensure_images() {
    local busybox=/bin/busybox stamp=$IMAGES_DIR/inputs.sha256 inputs python
    [[ -x $busybox ]] || die "$busybox missing (busybox-static not installed?)"
    inputs=$(cat "$HERE/pause.c" "$HERE/build_images.py" "$busybox" | sha256sum | cut -d' ' -f1)
    if [[ -f $stamp && $(cat "$stamp") == "$inputs" && -f $IMAGES_DIR/pause.tar && -f $IMAGES_DIR/busybox.tar ]]; then
        log "images present in $IMAGES_DIR"
        return
    fi
    local work
    work=$(mktemp -d)
    mkdir -p "$IMAGES_DIR"
    gcc -static -O2 -s -o "$work/pause" "$HERE/pause.c" || die "gcc -static pause.c failed (libc6-dev?)"
    python=$(command -v /usr/bin/python3 || command -v python3) || die "python3 not found"
    "$python" "$HERE/build_images.py" --pause-binary "$work/pause" --busybox-binary "$busybox" \
        --out-dir "$IMAGES_DIR" >&2 || die "building images failed"
    rm -rf "$work"
    printf '%s\n' "$inputs" >"$stamp"
}

main() {
    [[ $(id -u) == 0 ]] || die "must run as root (installs packages, runs containerd)"
    [[ $(uname -m) == x86_64 ]] || die "only amd64 is supported (images are built for amd64)"
    mkdir -p "$CACHE_DIR"
    ensure_apt_packages
    verify_containerd17
    ensure_containerd21
    verify_containerd21
    ensure_images
    log "ready: containerd $CONTAINERD17_VERSION (/usr/bin), $CONTAINERD21_VERSION ($CONTAINERD21_DIR/usr/bin), images in $IMAGES_DIR"
}

main "$@"
