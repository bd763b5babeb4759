#!/usr/bin/env bash
# Install kubectl for tests/deploy (`kubectl kustomize` renders deploy/kubernetes).
# Idempotent: a fast no-op when a kubectl with the kustomize subcommand is on PATH.
#
# Debian's kubernetes-client (kubectl 1.32, kustomize v5) comes from trixie: bookworm's
# is 1.20, whose kustomize v2 predates the `labels:` and `patches:` fields the manifests
# use. The trixie source comes from tests/setup/trixie-source.sh, pinned at priority 100
# so nothing else moves to trixie; kubectl needs only libc6 >= 2.34, which bookworm has.
# The plan is simulated first and refused if it would change or remove an installed package.
set -euo pipefail

PACKAGES=(kubernetes-client/trixie kubectl/trixie)

export DEBIAN_FRONTEND=noninteractive

log() { echo "install-kubectl: $*" >&2; }
die() {
    echo "install-kubectl: ERROR: $*" >&2
    exit 1
}

if command -v kubectl >/dev/null && kubectl kustomize --help >/dev/null 2>&1; then
    exit 0
fi
[[ $(id -u) == 0 ]] || die "kubectl is missing and installing it needs root:" \
    "apt-get install ${PACKAGES[*]} (Debian trixie), or put a kubectl >= 1.27 on PATH"

bash "$(dirname "${BASH_SOURCE[0]}")/../../setup/trixie-source.sh"

plan=$(apt-get install -s --no-install-recommends "${PACKAGES[@]}" 2>&1) || {
    apt-get update -q >/dev/null || die "apt-get update failed"
    plan=$(apt-get install -s --no-install-recommends "${PACKAGES[@]}" 2>&1) || {
        printf '%s\n' "$plan" >&2
        die "apt cannot plan: apt-get install ${PACKAGES[*]}"
    }
}
if grep -qE '^(Inst \S+ \[|Remv )' <<<"$plan"; then
    printf '%s\n' "$plan" >&2
    die "refusing: installing ${PACKAGES[*]} would change or remove installed packages"
fi
log "installing ${PACKAGES[*]}"
apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >/dev/null ||
    die "apt-get install ${PACKAGES[*]} failed"
kubectl version --client >&2
