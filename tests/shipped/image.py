"""The image under test: built once per session with tests/shipped/setup/build-image.sh.

Owns: running the build script (debootstrap base, ``podman build`` of deploy/Dockerfile),
saving the image to an archive once, the archive cached by the sources' key for a node that
has no podman (``cached_archive``, `make node-v2`'s guest), importing it into a containerd
under the exact reference a rendered manifest names (there is no registry to pull from), and
the pod network of a private containerd (CNI ptp + host-local, state under its private
directory).

Must not: change the Dockerfile or the manifests.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.containerd import Containerd
from tests.e2e.procs import scaled

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "tests" / "shipped" / "setup" / "build-image.sh"
CNI_PLUGINS = Path("/usr/lib/cni")
POD_NETWORK_PLUGINS = ("ptp", "host-local", "loopback")
# build-image.sh labels the image with its sources' key under this name.
SOURCE_KEY_LABEL = "io.nri-webhook-bridge.source-key"
# The image is about 300 MB: ctr stores and unpacks every layer (digests, thousands of files).
# Seconds on a host; more than 10 minutes in the emulated v2 guest on a busy machine.
IMPORT_TIMEOUT_S = scaled(300.0)


@dataclass(frozen=True, slots=True)
class BuiltImage:
    ref: str
    size_bytes: int
    build_s: float
    archive: Path


def _build_script(workdir: Path) -> tuple[str, int, float]:
    done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False)
    (workdir / "build.log").write_text(done.stderr)
    assert done.returncode == 0, f"image build failed:\n{done.stderr[-4000:]}"
    ref, size, seconds = done.stdout.split()
    return ref, int(size), float(seconds)


def _save(ref: str, archive: Path) -> None:
    subprocess.run(["podman", "save", "--format", "docker-archive", "-o", str(archive), ref],
                   check=True, capture_output=True)  # fmt: skip


def build(workdir: Path) -> BuiltImage:
    ref, size, seconds = _build_script(workdir)
    archive = workdir / "image.tar"
    _save(ref, archive)
    return BuiltImage(ref, size, seconds, archive)


def source_key() -> str:
    """The key build-image.sh labels the image with: a hash of every file the build reads."""
    done = subprocess.run(["bash", str(BUILD), "--key"], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout.strip()


def _labelled_key(ref: str) -> str | None:
    done = subprocess.run(
        ["podman", "image", "inspect", "--format",
         f'{{{{index .Labels "{SOURCE_KEY_LABEL}"}}}}', ref],
        capture_output=True, text=True, check=False)  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else None


def cached_archive(cache_dir: Path, ref: str) -> tuple[Path, bool]:
    """The image of this checkout's sources as an archive ``<cache_dir>/<key>.tar``: kept
    from an earlier run, else saved from podman's ``ref`` when that was built from the same
    sources (a `make shipped` run), else built first. Returns (archive, whether it was made
    now). Other keys' archives are removed; concurrent runs serialise on a lock."""
    key = source_key()
    cache_dir.mkdir(parents=True, exist_ok=True)
    archive = cache_dir / f"{key}.tar"
    with (cache_dir / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.is_file():
            return archive, False
        if _labelled_key(ref) != key:
            built, _, _ = _build_script(cache_dir)
            assert built == ref, f"build-image.sh built {built}, not {ref}"
            assert _labelled_key(ref) == key, "the sources changed during the image build"
        partial = archive.with_suffix(".tar.tmp")
        partial.unlink(missing_ok=True)
        _save(ref, partial)
        partial.rename(archive)
        for old in cache_dir.glob("*.tar"):
            if old != archive:
                old.unlink()
    return archive, True


def normalized(ref: str) -> str:
    """A reference as CRI resolves it (``name:tag`` -> ``docker.io/library/name:tag``)."""
    first = ref.split("/", 1)[0]
    if "/" not in ref:
        return f"docker.io/library/{ref}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{ref}"
    return ref


def import_as(containerd: Containerd, image: BuiltImage, refs: list[str]) -> None:
    containerd.ctr("images", "import", str(image.archive), timeout_s=IMPORT_TIMEOUT_S)
    for ref in refs:
        containerd.ctr("images", "tag", "--force", image.ref, normalized(ref))


def pod_network(containerd: Containerd, plugins: Path = CNI_PLUGINS) -> None:
    """A CNI ptp network for the private containerd: the pod gets its own network namespace
    and an address (the DaemonSet pod is not hostNetwork). Written before containerd starts;
    ``plugins`` holds the CNI plugin binaries (POD_NETWORK_PLUGINS)."""
    bin_dir = containerd.dirs.subdir("cni-bin")
    for plugin in POD_NETWORK_PLUGINS:
        link = bin_dir / plugin
        if not link.exists():
            link.symlink_to(plugins / plugin)
    # A subnet per instance (host-local state is private; routes are per address).
    n = os.getpid() % 250
    octet = 1 + hash(str(containerd.dirs.base)) % 250
    conf = {
        "cniVersion": "0.4.0",
        "name": "nri-shipped",
        "plugins": [{
            "type": "ptp",
            "ipMasq": False,
            "ipam": {"type": "host-local", "subnet": f"10.{200 + n % 50}.{octet}.0/24",
                     "dataDir": str(containerd.dirs.subdir("cni-ipam"))},
        }],
    }  # fmt: skip
    (containerd.dirs.subdir("cni-conf") / "10-nri-shipped.conflist").write_text(json.dumps(conf))
