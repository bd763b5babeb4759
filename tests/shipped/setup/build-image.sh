#!/usr/bin/env bash
# Build deploy/Dockerfile as a user would (`docker build -f deploy/Dockerfile .`), with podman
# and the debootstrap-made base (make-base-image.sh) passed as PYTHON_IMAGE, no layer cache.
#
# This machine's pip settings (its pip config and the CA bundle pip needs to reach PyPI) are
# bind-mounted read-only for the build's RUN steps only: they never end up in a layer.
#
# Prints "IMAGE SIZE_BYTES BUILD_SECONDS" on stdout; the build log goes to stderr.
# Env: NRI_SHIPPED_IMAGE (default localhost/nri-webhook-bridge:shipped).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
IMAGE=${NRI_SHIPPED_IMAGE:-localhost/nri-webhook-bridge:shipped}

base=$(bash "$HERE/make-base-image.sh")
mounts=()
for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do
    [[ -f $f ]] && mounts+=(-v "$f:$f:ro")
done
start=$(date +%s.%N)
old=$(podman image inspect --format "{{.Id}}" "$IMAGE" 2>/dev/null || true)
podman build --no-cache --pull=never --layers=false \
    -f "$REPO/deploy/Dockerfile" --build-arg "PYTHON_IMAGE=$base" \
    "${mounts[@]}" -t "$IMAGE" "$REPO" >&2
end=$(date +%s.%N)
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
# The previous build of this tag, now untagged: removed so repeated runs do not pile up.
[[ -n $old && $old != "$(podman image inspect --format "{{.Id}}" "$IMAGE")" ]] &&
    podman rmi "$old" >/dev/null 2>&1 || true
echo "$IMAGE $size $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"
