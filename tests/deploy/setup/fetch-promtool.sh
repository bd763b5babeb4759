#!/usr/bin/env bash
# Fetch promtool (Debian's prometheus package) for tests/deploy/test_alert_rules.py without
# installing the package: installing it would start a system Prometheus on port 9090. The
# package apt would install (`apt-get download prometheus`: the machine's own release; the
# trixie source of `make tools` is pinned below it) is unpacked under $BUILD; promtool needs
# only libc. A cached promtool is used only if it runs (`promtool --version`); otherwise it is
# fetched again. Prints the binary's path; exits 1 with the reason if the package cannot be had.
# `make tools` runs it under the setup lock (apt's lists are shared machine-wide).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${PROMTOOL_BUILD:-$HERE/.build}
BIN=$BUILD/root/usr/bin/promtool

die() { echo "promtool: $*" >&2; exit 1; }
runs() { [[ -x $BIN ]] && "$BIN" --version >/dev/null 2>&1; }

mkdir -p "$BUILD"
exec 9>"$BUILD/lock"
flock 9  # parallel test runs share this checkout's .build
if runs; then echo "$BIN"; exit 0; fi
[[ -e $BIN ]] && echo "promtool: the cached $BIN does not run; fetching it again" >&2
rm -rf "$BUILD/root" "$BUILD/debs" "$BUILD/unpacked"
mkdir -p "$BUILD/debs"
if ! (cd "$BUILD/debs" && apt-get download prometheus) >&2; then
    echo "promtool: apt-get update" >&2
    apt-get update -q >/dev/null || die "apt-get update failed"
    (cd "$BUILD/debs" && apt-get download prometheus) >&2 ||
        die "cannot download Debian's prometheus package (apt-get download prometheus)"
fi
# Keep promtool only (the prometheus server beside it is another ~50 MB).
rm -rf "$BUILD/unpacked"
dpkg -x "$BUILD"/debs/prometheus_*.deb "$BUILD/unpacked"
mkdir -p "$(dirname "$BIN")"
mv "$BUILD/unpacked/usr/bin/promtool" "$BIN"
rm -rf "$BUILD/debs" "$BUILD/unpacked"
runs || die "the unpacked promtool does not run: $("$BIN" --version 2>&1 | tail -1)"
"$BIN" --version 2>&1 | head -1 >&2
echo "$BIN"
