#!/usr/bin/env bash
# Build the Go floor plugin (main.go) without the Go module proxy: Debian's Go 1.24
# toolchain and the NRI stub library with its dependencies come as Debian packages,
# fetched with `apt-get download` and unpacked under $BUILD (nothing is installed
# system-wide), then built in GOPATH mode. Prints the binary's path; exits 1 if a
# package cannot be had (bench_webhook.py then reports the Go floor as unavailable).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${GOFLOOR_BUILD:-$HERE/.build}
BIN=$BUILD/gofloor
SUITE=${GOFLOOR_SUITE:-trixie}  # NRI 0.6.1 and Go 1.24; bookworm's Go 1.19 is too old
PACKAGES=(
  golang-1.24-go golang-1.24-src
  golang-github-containerd-nri-dev golang-github-containerd-ttrpc-dev
  golang-github-kubernetes-cri-api-dev golang-github-gogo-protobuf-dev
  golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev
  golang-google-grpc-dev golang-google-genproto-dev
  golang-golang-x-sys-dev golang-golang-x-net-dev golang-golang-x-text-dev
  golang-github-sirupsen-logrus-dev golang-github-pkg-errors-dev
  golang-github-opencontainers-specs-dev golang-github-opencontainers-runtime-tools-dev
  golang-github-opencontainers-selinux-dev golang-github-moby-sys-dev
  golang-github-hashicorp-go-multierror-dev golang-github-hashicorp-errwrap-dev
  golang-github-blang-semver-dev golang-k8s-sigs-yaml-dev
)
if [[ -x $BIN && $BIN -nt $HERE/main.go ]]; then echo "$BIN"; exit 0; fi
mkdir -p "$BUILD/debs" "$BUILD/root" "$BUILD/gopath/src/gofloor"
if ! ls "$BUILD"/debs/golang-github-containerd-nri-dev_*.deb >/dev/null 2>&1; then
  (cd "$BUILD/debs" && apt-get download -t "$SUITE" "${PACKAGES[@]}") >&2 || {
    echo "gofloor: cannot download the Go toolchain/NRI packages from Debian $SUITE" >&2
    echo "  (run 'apt-get update' first; the suite must be in the apt sources)" >&2
    exit 1
  }
fi
for deb in "$BUILD"/debs/*.deb; do dpkg -x "$deb" "$BUILD/root"; done
for dir in "$BUILD"/root/usr/share/gocode/src/*; do
  ln -sfn "$dir" "$BUILD/gopath/src/$(basename "$dir")"
done
cp "$HERE/main.go" "$BUILD/gopath/src/gofloor/main.go"
export GOROOT=$BUILD/root/usr/lib/go-1.24 GOPATH=$BUILD/gopath GOCACHE=$BUILD/cache
export GO111MODULE=off GOPROXY=off GOTOOLCHAIN=local GOFLAGS=
(cd "$BUILD/gopath/src/gofloor" && "$GOROOT/bin/go" build -o "$BIN" .) >&2
echo "$BIN"
