"""Fixtures of the as-shipped tests (``make shipped``).

Owns: failing (never skipping) when not root, private cgroup directories under the v1
controller hierarchies (removed afterwards), the image built once per session, and one private
containerd per version with a pod network (the DaemonSet pod is not hostNetwork), set up and
torn down as the e2e tests' (tests/e2e/private_containerd.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cgroup_scope import KUBEPODS
from tests.e2e.containerd import Containerd
from tests.e2e.private_containerd import private_containerd
from tests.e2e.runtimes import RUNTIMES, Runtime

from .image import BuiltImage, build, pod_network

CGROUP_V1_ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("cpu", "memory")


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.fail("the as-shipped tests need root (make shipped)", pytrace=False)


@contextlib.contextmanager
def _v1_pod_cgroup(level: str) -> Iterator[str]:
    """``/kubepods/nri-shipped-<id>[/<level>]/pod<uid>`` made in the cpu and memory hierarchies
    as kubelet makes pod cgroups, with a CFS quota the policy server must replace (beneath
    /kubepods: the shipped policy server writes nowhere else; kubepods itself is left,
    tests/e2e/cgroup_scope.py says why). Removed afterwards, up to the nri-shipped level."""
    top = Path(KUBEPODS) / f"nri-shipped-{uuid.uuid4().hex[:12]}"
    rel = top / level / f"pod{uuid.uuid4()}"
    made: list[Path] = []
    for controller in V1_CONTROLLERS:
        d = CGROUP_V1_ROOT / controller / rel
        d.mkdir(parents=True)
        ours = [p for p in (rel, *rel.parents) if p not in (Path("."), Path(KUBEPODS))]
        made += [CGROUP_V1_ROOT / controller / p for p in ours]  # deepest first
    (CGROUP_V1_ROOT / "cpu" / rel / "cpu.cfs_quota_us").write_text("50000\n")
    try:
        yield f"/{rel}"
    finally:
        for d in made:
            with contextlib.suppress(OSError):
                d.rmdir()


@pytest.fixture
def v1_pod_parent() -> Iterator[str]:
    """A Guaranteed-shaped pod cgroup (``/kubepods/<prefix>/pod<uid>``): see _v1_pod_cgroup."""
    with _v1_pod_cgroup("") as parent:
        yield parent


@pytest.fixture
def v1_besteffort_pod_parent() -> Iterator[str]:
    """A kube-BestEffort pod cgroup (``/kubepods/<prefix>/besteffort/pod<uid>``): koordinator
    gives batch values only to a pod kubelet made BestEffort (a policy never makes a pod
    stronger than kubelet made it)."""
    with _v1_pod_cgroup("besteffort") as parent:
        yield parent


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A private directory whose parents a non-root UID can traverse (pytest's are 0700)."""
    d = Path(tempfile.mkdtemp(prefix="nri-shipped-", dir="/tmp"))
    d.chmod(0o711)
    yield d
    shutil.rmtree(d, ignore_errors=True)


# --- the image and a private containerd with a pod network -------------------------------

@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> BuiltImage:
    built = build(tmp_path_factory.mktemp("image"))
    print(f"\nimage {built.ref}: {built.size_bytes / 1e6:.0f} MB, built in {built.build_s} s "
          "(debootstrap base, no layer cache)")
    return built


@pytest.fixture(scope="module", params=RUNTIMES, ids=lambda r: f"containerd-{r.version}")
def node(request: pytest.FixtureRequest) -> Iterator[Containerd]:
    """A private containerd with NRI, a CNI pod network and the e2e images imported."""
    runtime: Runtime = request.param
    module = request.module.__name__.rsplit(".", 1)[-1]
    with private_containerd(runtime, prefix=f"nri-shp-{runtime.version}-",
                            log_name=f"{module}-containerd-{runtime.version}.log",
                            prepare=pod_network) as instance:
        yield instance


@pytest.fixture(scope="session")
def containers_conf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """podman run settings for this machine: rootful podman 4.3 cannot raise its default
    rlimits here ("error setting rlimit type 7"), so runs get explicit ones."""
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    conf.write_text('[containers]\ndefault_ulimits = ["nofile=20000:20000", '
                    '"nproc=32768:32768"]\n')
    return conf
