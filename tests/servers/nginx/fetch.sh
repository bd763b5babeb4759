#!/usr/bin/env bash
# Fetch Debian's nginx binary for the conformance matrix without installing the package
# (installing it would start a system nginx on port 80): `apt-get download nginx` from the
# machine's own Debian release, unpacked under $BUILD. Its libraries (libc, libcrypt,
# libpcre2, libssl3, zlib) are on every Debian system. Prints the binary's path; exits 1
# with the reason if the package cannot be had.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${NGINX_BUILD:-$HERE/.build}
BIN=$BUILD/root/usr/sbin/nginx
mkdir -p "$BUILD"
exec 9>"$BUILD/lock"
flock 9  # parallel test runs share this checkout's .build
if [[ -x $BIN ]]; then echo "$BIN"; exit 0; fi
mkdir -p "$BUILD/debs"
if ! ls "$BUILD"/debs/nginx_*.deb >/dev/null 2>&1; then
  (cd "$BUILD/debs" && apt-get download nginx) >&2 || {
    echo "nginx: cannot download Debian's nginx package (run 'apt-get update' first)" >&2
    exit 1
  }
fi
dpkg -x "$BUILD"/debs/nginx_*.deb "$BUILD/root"
"$BIN" -v >&2 || { echo "nginx: the unpacked binary does not run (missing libraries?)" >&2; exit 1; }
echo "$BIN"
