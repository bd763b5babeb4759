#!/usr/bin/env bash
# Fetch Debian's nginx binary for the conformance matrix without installing the package
# (installing it would start a system nginx on port 80): `apt-get download nginx=VERSION`,
# VERSION being the newest nginx of the machine's own Debian release (its suites: bookworm,
# bookworm-updates, bookworm-security on bookworm), unpacked under $BUILD. Other sources may be
# configured (trixie pinned low by make tools, sid for a moment by install-runtimes.sh): their
# newer nginx needs newer libraries than this release has, so it is never the one fetched. Its
# libraries (libc, libcrypt, libpcre2, libssl3, zlib) are on every Debian system.
# A cached binary is used only if it runs (`nginx -v`); otherwise it is fetched again.
# Prints the binary's path; exits 1 with the reason if the package cannot be had.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${NGINX_BUILD:-$HERE/.build}
BIN=$BUILD/root/usr/sbin/nginx
RELEASE=${NGINX_RELEASE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}

die() { echo "nginx: $*" >&2; exit 1; }
runs() { [[ -x $BIN ]] && "$BIN" -v >/dev/null 2>&1; }

# The newest nginx version apt knows from $RELEASE's own suites. A madison line:
#   nginx | 1.22.1-9+deb12u11 | http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
release_version() {
    local best="" version suite
    while read -r version suite; do
        if [[ $suite == "$RELEASE" || $suite == "$RELEASE"-* ]] &&
            { [[ -z $best ]] || dpkg --compare-versions "$version" gt "$best"; }; then
            best=$version
        fi
    done < <(apt-cache madison nginx | awk '{split($6, s, "/"); print $3, s[1]}')
    [[ -n $best ]] && echo "$best"
}

mkdir -p "$BUILD"
exec 9>"$BUILD/lock"
flock 9  # parallel test runs share this checkout's .build
if runs; then echo "$BIN"; exit 0; fi
[[ -e $BIN ]] && echo "nginx: the cached $BIN does not run; fetching it again" >&2
rm -rf "$BUILD/root"
[[ -n $RELEASE ]] || die "no VERSION_CODENAME in /etc/os-release: which Debian release is this?"
version=$(release_version) ||
    die "apt knows no nginx from Debian $RELEASE's suites (run 'apt-get update' first)"
mkdir -p "$BUILD/debs"
deb=""
for cached in "$BUILD"/debs/nginx_*.deb; do
    if [[ -f $cached && $(dpkg-deb -f "$cached" Version) == "$version" ]]; then
        deb=$cached
    else
        rm -f "$cached"  # another version (another release's, or superseded)
    fi
done
if [[ -z $deb ]]; then
    (cd "$BUILD/debs" && apt-get download "nginx=$version") >&2 ||
        die "cannot download nginx=$version (Debian $RELEASE; run 'apt-get update' first)"
    deb=$(ls "$BUILD"/debs/nginx_*.deb)
fi
dpkg -x "$deb" "$BUILD/root"
runs || die "the unpacked nginx $version does not run: $("$BIN" -v 2>&1 | tail -1)"
"$BIN" -v >&2
echo "$BIN"
