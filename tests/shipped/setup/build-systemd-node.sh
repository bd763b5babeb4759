#!/usr/bin/env bash
# Build the systemd node image (systemd-node.Containerfile) on the debootstrap base. The build
# context is a temporary directory with the project's installable files, deploy/systemd and
# docs/deployment.md only. pip settings as in build-image.sh (read-only, build time only).
# Prints the image reference on stdout.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
IMAGE=${NRI_SHIPPED_SYSTEMD_IMAGE:-localhost/nri-webhook-bridge-systemd-node:shipped}

base=$(bash "$HERE/make-base-image.sh")
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
(cd "$REPO" && git ls-files -z pyproject.toml README.md bridge policy_server deploy/systemd \
    docs/deployment.md | xargs -0 cp --parents -t "$ctx")
cp "$HERE/install-systemd.sh" "$ctx/"
mounts=()
for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do
    [[ -f $f ]] && mounts+=(-v "$f:$f:ro")
done
old=$(podman image inspect --format "{{.Id}}" "$IMAGE" 2>/dev/null || true)
podman build --pull=never --layers=false -f "$HERE/systemd-node.Containerfile" \
    --build-arg "BASE_IMAGE=$base" "${mounts[@]}" -t "$IMAGE" "$ctx" >&2
# The previous build of this tag, now untagged: removed so repeated runs do not pile up.
[[ -n $old && $old != "$(podman image inspect --format "{{.Id}}" "$IMAGE")" ]] &&
    podman rmi "$old" >/dev/null 2>&1 || true
echo "$IMAGE"
