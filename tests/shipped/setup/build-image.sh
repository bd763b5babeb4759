#!/usr/bin/env bash
# Build deploy/Dockerfile as a user would (`docker build -f deploy/Dockerfile .`), with podman
# and the debootstrap-made base (make-base-image.sh) passed as PYTHON_IMAGE, no layer cache.
#
# This machine's pip settings (its pip config and the CA bundle pip needs to reach PyPI) are
# bind-mounted read-only for the build's RUN steps only: they never end up in a layer.
#
# The image is labelled with SOURCE_KEY_LABEL, a hash of everything the build reads (the
# Dockerfile and its context filter, the files the context keeps, these scripts), so a later
# step can tell whether an image it finds was built from this checkout's sources.
#
# Prints "IMAGE SIZE_BYTES BUILD_SECONDS" on stdout; the build log goes to stderr.
# `build-image.sh --key` prints only the source key (no build, no podman).
# Env: NRI_SHIPPED_IMAGE (default localhost/nri-webhook-bridge:shipped).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
IMAGE=${NRI_SHIPPED_IMAGE:-localhost/nri-webhook-bridge:shipped}
SOURCE_KEY_LABEL=io.nri-webhook-bridge.source-key

# Relative paths and contents only: two checkouts of the same sources get the same key.
# (What deploy/Dockerfile.dockerignore keeps: pyproject.toml, README.md, bridge/, policy_server/.)
source_key() {
    (cd "$REPO" && find pyproject.toml README.md bridge policy_server deploy/Dockerfile \
        deploy/Dockerfile.dockerignore tests/shipped/setup/build-image.sh \
        tests/shipped/setup/make-base-image.sh -type f ! -path '*/__pycache__/*' ! -name '*.pyc' \
        -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}
if [[ ${1:-} == --key ]]; then
    source_key
    exit 0
fi

base=$(bash "$HERE/make-base-image.sh")
mounts=()
for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do
    [[ -f $f ]] && mounts+=(-v "$f:$f:ro")
done
start=$(date +%s.%N)
old=$(podman image inspect --format "{{.Id}}" "$IMAGE" 2>/dev/null || true)
podman build --no-cache --pull=never --layers=false \
    -f "$REPO/deploy/Dockerfile" --build-arg "PYTHON_IMAGE=$base" \
    --label "$SOURCE_KEY_LABEL=$(source_key)" "${mounts[@]}" -t "$IMAGE" "$REPO" >&2
end=$(date +%s.%N)
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
# The previous build of this tag, now untagged: removed so repeated runs do not pile up.
[[ -n $old && $old != "$(podman image inspect --format "{{.Id}}" "$IMAGE")" ]] &&
    podman rmi "$old" >/dev/null 2>&1 || true
echo "$IMAGE $size $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"
