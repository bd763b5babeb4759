"""Where a pod's cgroup files are, for cgroup v1 and v2 and both kubelet cgroup drivers.

Owns the cgroup version setting, the pod-level files the executor may write (their v1 names,
controllers and v2 names) and the v2 value of a v1 write, and the directory of a pod
(``cgroup_dir``) or container (``container_dir``) below a hierarchy root. systemd names come
from the one slice grammar (``bridge.contract.systemd_slice``). Must not write anything.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from pathlib import Path, PurePosixPath

from bridge.contract import systemd_slice
from policy_server.node.cpu_weight import WeightFormula, to_weight

DEFAULT_CGROUP_ROOT = Path("/sys/fs/cgroup")
# Pod cgroup directories remembered as text (a node's pods, with room for churn).
CGROUP_DIR_CACHE_SIZE = 16_384
# cgroup v1 reports "no memory limit" as a page-rounded huge number, not -1.
V1_UNLIMITED_MEMORY = 1 << 62


class CgroupVersion(StrEnum):
    AUTO = "auto"
    V1 = "1"
    V2 = "2"


# v1 file name -> (v1 controller directory, v2 file name)
FILES: dict[str, tuple[str, str]] = {
    "cpu.shares": ("cpu", "cpu.weight"),
    "cpu.cfs_quota_us": ("cpu", "cpu.max"),
    "memory.limit_in_bytes": ("memory", "memory.max"),
    "cpu.bvt_warp_ns": ("cpu", "cpu.bvt_warp_ns"),
    "cpu.idle": ("cpu", "cpu.idle"),
}


def v2_value(file: str, value: int, weights: WeightFormula) -> str:
    """The text cgroup v2 wants for a write of ``value`` into the v1 ``file``."""
    if file == "cpu.shares":
        # As the node's runtime converts the containers' shares (policy_server.node.cpu_weight).
        return str(to_weight(weights, value))
    if file in ("cpu.cfs_quota_us", "memory.limit_in_bytes"):
        # -1 (unlimited) is "max" in v2. Writing only $MAX to cpu.max leaves the period alone
        # (koordlet never sets the period).
        return "max" if value < 0 else str(value)
    return str(value)


@functools.lru_cache(maxsize=CGROUP_DIR_CACHE_SIZE)
def cgroup_dir_text(parent: str) -> str:
    """``cgroup_dir`` as text, remembered: each pod's parent is asked for at every write (text,
    not a path: a Synchronize asks for every pod's once, docs/performance.md)."""
    parent = parent.strip()
    if not parent:
        raise ValueError("empty cgroup parent")
    if systemd_slice.is_slice_name(parent):
        return systemd_slice.slice_path(parent)
    # As a path reads it: empty and "." components dropped, ".." refused.
    names = [name for name in parent.split("/") if name and name != "."]
    if not names or ".." in names:
        raise ValueError(f"invalid cgroup parent {parent!r}")
    return "/".join(names)


def cgroup_dir(parent: str) -> PurePosixPath:
    """The pod's directory relative to a hierarchy root, for both cgroup drivers.

    cgroupfs: ``/kubepods/burstable/pod<uid>`` as is. systemd: ``kubepods-burstable-pod<uid>.slice``
    expands to ``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice``.
    Raises ``ValueError`` for an empty parent, a bad slice name or a ``..``.
    """
    return PurePosixPath(cgroup_dir_text(parent))


def container_dir(cgroups_path: str) -> PurePosixPath:
    """A container's cgroup directory relative to a hierarchy root.

    cgroupfs: ``/kubepods/pod<uid>/<id>`` as is; systemd: ``<slice>:<prefix>:<id>`` is
    ``<slice path>/<prefix>-<id>.scope``.
    """
    scope = systemd_slice.scope_of(cgroups_path)
    if scope is not None:
        slice_, unit = scope
        return cgroup_dir(slice_) / unit
    return cgroup_dir(cgroups_path)


def read_text(path: Path) -> str | None:
    """A cgroup (or proc) file's text without the ends' white space; None if unreadable."""
    try:
        return path.read_text().strip()
    except OSError:
        return None
