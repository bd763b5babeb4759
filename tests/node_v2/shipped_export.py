"""The shipped image and manifests carried into the `make node-v2` guest.

The guest has no podman, no kubectl and no network, so the host does what those need and the
guest reads the results over its shares:

- on the host (``python -m tests.node_v2.shipped_export``, a step of `make node-v2`): the image
  of this checkout's sources as an archive in the e2e cache (tests/shipped/image.py builds it
  with build-image.sh only when no archive or podman image of these sources exists), the CNI
  plugins of the DaemonSet pod's network copied beside it, and the production overlay with
  components/node-effects rendered with `kubectl kustomize`; written to
  ``.e2e/node-v2-shipped/export.json`` in the checkout;
- in the guest (``load``): that file, checked against the checkout it runs on (the image's
  source key and the manifests' hash), so a stale export fails with what to run.

Owns: the export's layout and its freshness check. Must not: change the image or the rendered
objects (the guest runs exactly what the host built and rendered).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.deploy.support import KUSTOMIZE, OVERLAYS, combination, render
from tests.e2e.runtimes import CACHE_DIR
from tests.shipped.image import (
    CNI_PLUGINS,
    POD_NETWORK_PLUGINS,
    BuiltImage,
    cached_archive,
    source_key,
)

REPO = Path(__file__).resolve().parents[2]
EXPORT = REPO / ".e2e" / "node-v2-shipped" / "export.json"
IMAGE_REF = "localhost/nri-webhook-bridge:shipped"
# Under the e2e cache, which the guest mounts read-only at the same path (run-guest.sh).
ARCHIVES = CACHE_DIR / "shipped-image"
CNI_BIN = CACHE_DIR / "cni-bin"
OVERLAY = next(p for p in OVERLAYS if p.name == "production")


class StaleExport(AssertionError):
    """The export is missing or was made from other sources than this checkout's."""


@dataclass(frozen=True, slots=True)
class ShippedExport:
    image: BuiltImage
    overlay: Path
    docs: list[dict[str, Any]]


def manifests_key() -> str:
    """A hash of deploy/kubernetes (what the rendered objects come from)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in KUSTOMIZE.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(KUSTOMIZE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _copy_cni_plugins(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for plugin in POD_NETWORK_PLUGINS:
        source, dest = CNI_PLUGINS / plugin, target / plugin
        if not source.is_file():
            raise SystemExit(f"{source} missing: tests/shipped/setup/install-tools.sh installs it")
        if not dest.is_file() or dest.read_bytes() != source.read_bytes():
            partial = dest.with_suffix(".tmp")
            shutil.copy2(source, partial)
            partial.rename(dest)


def export() -> str:
    """The host's step; returns a line saying what it did."""
    archive, made = cached_archive(ARCHIVES, IMAGE_REF)
    _copy_cni_plugins(CNI_BIN)
    body = {
        "image": {"ref": IMAGE_REF, "key": archive.stem,
                  "archive": str(archive.relative_to(CACHE_DIR))},
        "overlay": OVERLAY.name,
        "manifests_key": manifests_key(),
        # With components/node-effects: the pool with hostPID, the capabilities and resctrl
        # (the OOM-score test needs them; the overlay alone forces none of them).
        "docs": render(combination(OVERLAY, [KUSTOMIZE / "components" / "node-effects"])),
    }  # fmt: skip
    EXPORT.parent.mkdir(parents=True, exist_ok=True)
    partial = EXPORT.with_suffix(".tmp")
    partial.write_text(json.dumps(body))
    partial.rename(EXPORT)
    how = "saved now" if made else "cached"
    return (f"node-v2: shipped image {IMAGE_REF} (sources {archive.stem}, archive {how}: "
            f"{archive}), overlay {OVERLAY.name} rendered")  # fmt: skip


def load() -> ShippedExport:
    """The export, checked against this checkout (in the guest)."""
    hint = "run `make node-v2` (its host step exports the image and the rendered manifests)"
    if not EXPORT.is_file():
        raise StaleExport(f"{EXPORT} missing: {hint}")
    body = json.loads(EXPORT.read_text())
    if body["image"]["key"] != source_key():
        raise StaleExport(f"the exported image is of other sources than this checkout's: {hint}")
    if body["manifests_key"] != manifests_key():
        raise StaleExport(f"deploy/kubernetes changed since it was rendered: {hint}")
    archive = CACHE_DIR / body["image"]["archive"]
    if not archive.is_file():
        raise StaleExport(f"{archive} missing: {hint}")
    image = BuiltImage(body["image"]["ref"], archive.stat().st_size, 0.0, archive)
    overlay = KUSTOMIZE / "overlays" / body["overlay"]
    return ShippedExport(image, overlay, body["docs"])


if __name__ == "__main__":
    print(export())
