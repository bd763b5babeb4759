"""Build the e2e test images as OCI image-layout tarballs, without a registry.

Owns: turning a few local files (a static pause binary, Debian's busybox-static)
into single-layer OCI images that ``ctr images import`` accepts. Uses only the
standard library so it can run before the project's venv exists.

Must not: fetch anything, or depend on the project's packages.

Layout written (OCI image-layout spec 1.0): ``oci-layout``, ``index.json`` and
``blobs/sha256/<hex>`` for the layer (uncompressed tar, so digest == diff_id),
the image config and the manifest. The image name travels in the index
annotations: ``io.containerd.image.name`` (full reference, which containerd's
importer prefers) and ``org.opencontainers.image.ref.name`` (the tag).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

# Fixed timestamp so the same inputs always give the same digests.
EPOCH_S = 0
BUSYBOX_APPLETS = ("sh", "env", "sleep", "cat", "ls", "echo", "true", "grep", "id")
ROOT_DIRS = ("bin", "dev", "etc", "proc", "sys", "tmp", "var")


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """What goes into one single-layer image."""

    name: str  # full reference, e.g. localhost/nri-e2e/pause:1.0
    files: dict[str, Path]  # path in image -> host file (mode 0755)
    symlinks: dict[str, str]  # path in image -> link target
    entrypoint: list[str]
    cmd: list[str]


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o1777 if name == "tmp" else 0o755
    info.mtime = EPOCH_S
    tar.addfile(info)


def _layer_bytes(spec: ImageSpec) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in ROOT_DIRS:
            _add_dir(tar, name)
        for dest, src in sorted(spec.files.items()):
            data = src.read_bytes()
            info = tarfile.TarInfo(dest)
            info.size = len(data)
            info.mode = 0o755
            info.mtime = EPOCH_S
            tar.addfile(info, io.BytesIO(data))
        for dest, target in sorted(spec.symlinks.items()):
            info = tarfile.TarInfo(dest)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            info.mode = 0o777
            info.mtime = EPOCH_S
            tar.addfile(info)
    return buf.getvalue()


def _blob(blobs: dict[str, bytes], data: bytes, media_type: str) -> dict[str, object]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def _json_bytes(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def build_layout(spec: ImageSpec) -> dict[str, bytes]:
    """Return the image layout as {path in tarball: content}."""
    blobs: dict[str, bytes] = {}
    layer = _layer_bytes(spec)
    layer_desc = _blob(blobs, layer, "application/vnd.oci.image.layer.v1.tar")
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            "Entrypoint": spec.entrypoint,
            "Cmd": spec.cmd,
            "Env": ["PATH=/bin"],
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "nri-e2e build_images"}],
    }
    config_desc = _blob(blobs, _json_bytes(config), "application/vnd.oci.image.config.v1+json")
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer_desc],
    }
    manifest_desc = _blob(
        blobs, _json_bytes(manifest), "application/vnd.oci.image.manifest.v1+json"
    )
    tag = spec.name.rsplit(":", 1)[1]
    manifest_desc["platform"] = {"architecture": "amd64", "os": "linux"}
    manifest_desc["annotations"] = {
        "io.containerd.image.name": spec.name,
        "org.opencontainers.image.ref.name": tag,
    }
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [manifest_desc],
    }
    files = {f"blobs/sha256/{d.split(':', 1)[1]}": data for d, data in blobs.items()}
    files["oci-layout"] = _json_bytes({"imageLayoutVersion": "1.0.0"})
    files["index.json"] = _json_bytes(index)
    return files


def write_tarball(files: dict[str, bytes], out: Path) -> None:
    """Write the layout atomically (a reader never sees a half-written tarball)."""
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, mode="w") as tar:
        for name in ("blobs", "blobs/sha256"):
            _add_dir(tar, name)
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = EPOCH_S
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(out)


def main() -> None:
    parser = argparse.ArgumentParser(description="Build the e2e OCI image tarballs.")
    parser.add_argument("--pause-binary", type=Path, required=True)
    parser.add_argument("--busybox-binary", type=Path, required=True)
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args()

    specs = {
        "pause.tar": ImageSpec(
            name="localhost/nri-e2e/pause:1.0",
            files={"pause": args.pause_binary},
            symlinks={},
            entrypoint=["/pause"],
            cmd=[],
        ),
        "busybox.tar": ImageSpec(
            name="localhost/nri-e2e/busybox:1.0",
            files={"bin/busybox": args.busybox_binary},
            symlinks={f"bin/{applet}": "busybox" for applet in BUSYBOX_APPLETS},
            entrypoint=[],
            cmd=["/bin/sh"],
        ),
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for filename, spec in specs.items():
        write_tarball(build_layout(spec), args.out_dir / filename)
        print(f"built {spec.name} -> {args.out_dir / filename}")


if __name__ == "__main__":
    main()
