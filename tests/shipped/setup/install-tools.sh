#!/usr/bin/env bash
# Install what `make shipped` needs from Debian bookworm. Idempotent: a fast no-op when done.
#
#   podman       builds deploy/Dockerfile (as `docker build` would) and runs systemd as PID 1
#   debootstrap  makes the Python 3.11 base image (no registry is reachable from CI)
#   containernetworking-plugins  ptp/host-local/loopback: the DaemonSet pod's own network
#   kubectl      renders the kustomize manifests (tests/deploy/setup/install-kubectl.sh)
#   containerd 1.7.24 / 2.1.9 and the CRI proto: tests/e2e/setup/install-runtimes.sh
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)

log() { echo "install-shipped-tools: $*" >&2; }

missing=()
for pkg in podman debootstrap systemd containernetworking-plugins; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -q -y --no-install-recommends "${missing[@]}"
fi
bash "$REPO/tests/deploy/setup/install-kubectl.sh"
bash "$REPO/tests/e2e/setup/install-runtimes.sh"
log "ready: $(podman --version), debootstrap $(dpkg-query -W -f='${Version}' debootstrap)"
