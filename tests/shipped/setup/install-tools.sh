#!/usr/bin/env bash
# Install what `make shipped` needs from Debian bookworm. Idempotent: a fast no-op when done.
#
#   podman       builds deploy/Dockerfile (as `docker build` would) and runs systemd as PID 1
#   debootstrap  makes the Python 3.11 base image (no registry is reachable from CI)
#   containernetworking-plugins  ptp/host-local/loopback: the DaemonSet pod's own network
#   podman-compose 1.6.0 (PyPI, own venv) runs docker-compose.yml
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
# podman-compose from PyPI, in its own venv (a test tool, not a project dependency): Debian's
# 1.0.3 mishandles `network_mode: none` and still exits 0.
COMPOSE_VERSION=1.6.0
COMPOSE_VENV=${NRI_SHIPPED_CACHE_DIR:-/var/cache/nri-webhook-bridge-shipped}/podman-compose-$COMPOSE_VERSION
if [[ ! -x $COMPOSE_VENV/bin/podman-compose ]]; then
    log "installing podman-compose $COMPOSE_VERSION into $COMPOSE_VENV"
    rm -rf "$COMPOSE_VENV.tmp"
    python3 -m venv "$COMPOSE_VENV.tmp"
    "$COMPOSE_VENV.tmp/bin/pip" install -q "podman-compose==$COMPOSE_VERSION"
    rm -rf "$COMPOSE_VENV"
    mv "$COMPOSE_VENV.tmp" "$COMPOSE_VENV"
    # venv scripts name their interpreter by absolute path: point them at the final place.
    sed -i "1s|$COMPOSE_VENV.tmp|$COMPOSE_VENV|" "$COMPOSE_VENV"/bin/*
fi
bash "$REPO/tests/deploy/setup/install-kubectl.sh"
bash "$REPO/tests/e2e/setup/install-runtimes.sh"
log "ready: $(podman --version), debootstrap $(dpkg-query -W -f='${Version}' debootstrap)"
