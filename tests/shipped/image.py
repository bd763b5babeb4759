"""The image under test: built once per session with tests/shipped/setup/build-image.sh.

Owns: running the build script (debootstrap base, ``podman build`` of deploy/Dockerfile),
saving the image to an archive once, importing it into a containerd under the exact
reference a rendered manifest names (there is no registry to pull from), and the pod network
of a private containerd (CNI ptp + host-local, state under its private directory).

Must not: change the Dockerfile or the manifests.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.containerd import Containerd

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "tests" / "shipped" / "setup" / "build-image.sh"
CNI_PLUGINS = Path("/usr/lib/cni")


@dataclass(frozen=True, slots=True)
class BuiltImage:
    ref: str
    size_bytes: int
    build_s: float
    archive: Path


def build(workdir: Path) -> BuiltImage:
    done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False)
    (workdir / "build.log").write_text(done.stderr)
    assert done.returncode == 0, f"image build failed:\n{done.stderr[-4000:]}"
    ref, size, seconds = done.stdout.split()
    archive = workdir / "image.tar"
    subprocess.run(["podman", "save", "--format", "docker-archive", "-o", str(archive), ref],
                   check=True, capture_output=True)  # fmt: skip
    return BuiltImage(ref, int(size), float(seconds), archive)


def normalized(ref: str) -> str:
    """A reference as CRI resolves it (``name:tag`` -> ``docker.io/library/name:tag``)."""
    first = ref.split("/", 1)[0]
    if "/" not in ref:
        return f"docker.io/library/{ref}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{ref}"
    return ref


def import_as(containerd: Containerd, image: BuiltImage, refs: list[str]) -> None:
    containerd.ctr("images", "import", str(image.archive))
    for ref in refs:
        containerd.ctr("images", "tag", "--force", image.ref, normalized(ref))


def pod_network(containerd: Containerd) -> None:
    """A CNI ptp network for the private containerd: the pod gets its own network namespace
    and an address (the DaemonSet pod is not hostNetwork). Written before containerd starts."""
    bin_dir = containerd.dirs.subdir("cni-bin")
    for plugin in ("ptp", "host-local", "loopback"):
        link = bin_dir / plugin
        if not link.exists():
            link.symlink_to(CNI_PLUGINS / plugin)
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
