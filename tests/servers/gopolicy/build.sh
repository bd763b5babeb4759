#!/usr/bin/env bash
# Build the Go conformance policy (main.go, standard library only) without the Go module
# proxy: Debian's Go 1.24 toolchain is fetched with `apt-get download` and unpacked under
# $BUILD (nothing installed system-wide), as benchmarks/gofloor/build.sh does. A cached
# binary is used only if it is newer than main.go and runs (`gopolicy -h`: exit 0); cached
# toolchain packages only if they are whole (`dpkg-deb --info`). Prints the binary's path;
# exits 1 with the reason if the toolchain cannot be had.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${GOPOLICY_BUILD:-$HERE/.build}
BIN=$BUILD/gopolicy
SUITE=${GOPOLICY_SUITE:-trixie}  # Go 1.24; bookworm's Go 1.19 lacks StatusEarlyHints writes
current() { [[ -x $BIN && $BIN -nt $HERE/main.go ]] && "$BIN" -h >/dev/null 2>&1; }
whole_debs() {
    local deb found=0
    for deb in "$BUILD"/debs/golang-1.24-go_*.deb "$BUILD"/debs/golang-1.24-src_*.deb; do
        [[ -f $deb ]] && dpkg-deb --info "$deb" >/dev/null 2>&1 || return 1
        found=$((found + 1))
    done
    ((found == 2))
}
if current; then echo "$BIN"; exit 0; fi
mkdir -p "$BUILD"
exec 9>"$BUILD/lock"
flock 9  # one build at a time (parallel test runs share this checkout's .build)
if current; then echo "$BIN"; exit 0; fi
[[ -x $BIN && $BIN -nt $HERE/main.go ]] &&
    echo "gopolicy: the cached $BIN does not run; building it again" >&2
mkdir -p "$BUILD/debs" "$BUILD/root" "$BUILD/src"
if ! whole_debs; then
  rm -f "$BUILD"/debs/*.deb
  (cd "$BUILD/debs" && apt-get download -t "$SUITE" golang-1.24-go golang-1.24-src) >&2 || {
    echo "gopolicy: cannot download golang-1.24-go/-src from Debian $SUITE" >&2
    echo "  (the suite must be in the apt sources: make tools adds it; then apt-get update)" >&2
    exit 1
  }
fi
for deb in "$BUILD"/debs/*.deb; do dpkg -x "$deb" "$BUILD/root"; done
cp "$HERE/main.go" "$BUILD/src/main.go"
export GOROOT=$BUILD/root/usr/lib/go-1.24 GOCACHE=$BUILD/cache GOPATH=$BUILD/gopath
export GO111MODULE=off GOPROXY=off GOTOOLCHAIN=local GOFLAGS=
"$GOROOT/bin/go" version >/dev/null 2>&1 || {
    rm -f "$BUILD"/debs/*.deb  # fetched again next time
    echo "gopolicy: the unpacked Go toolchain does not run: $("$GOROOT/bin/go" version 2>&1)" >&2
    exit 1
}
(cd "$BUILD/src" && "$GOROOT/bin/go" build -o "$BIN.tmp" main.go && mv "$BIN.tmp" "$BIN") >&2
current || { echo "gopolicy: the built $BIN does not run" >&2; exit 1; }
echo "$BIN"
