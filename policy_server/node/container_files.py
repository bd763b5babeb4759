"""A container's CPU and memory values and its processes, read from its cgroup (for the
reconciler).

Owns reading ``shares``/``weight``, ``quota``, ``cpus`` and ``memory`` of one container's
cgroup, v1 or v2, and its ``cgroup.procs``, each through a confined path
(``pod_confinement``): the container's directory must lie beneath the pod hierarchy and is
reached without following a symlink, so a forged ``cgroups_path`` in the bridge's state cannot
make the reconciler read (or later write the OOM scores of) another cgroup's processes. Must not
write anything or raise: what cannot be read, or is outside, is left out.
"""

from __future__ import annotations

import logging
from pathlib import Path

from policy_server.node.cgroup_layout import V1_UNLIMITED_MEMORY, CgroupVersion, container_dir
from policy_server.node.pod_confinement import PodHierarchy, read_beneath

log = logging.getLogger(__name__)


class ContainerFiles:
    """The containers' cgroups under ``root`` (cgroup ``version``, 1 or 2)."""

    def __init__(
        self, root: Path, version: CgroupVersion, pods: PodHierarchy | None = None
    ) -> None:
        self.root = root
        self.v2 = version is CgroupVersion.V2
        self.pods = pods if pods is not None else PodHierarchy()

    def _names(self, cgroups_path: str, pod_uid: str | None) -> tuple[str, ...] | None:
        """The container's directory as checked components, None if invalid or outside."""
        try:
            return self.pods.container(str(container_dir(cgroups_path)), pod_uid)
        except ValueError as exc:
            log.warning("container cgroup not read: %s", exc)
            return None

    def _read(self, controller: str, names: tuple[str, ...], file: str) -> str | None:
        root = str(self.root).rstrip("/") or "/"
        return read_beneath(root if self.v2 else f"{root}/{controller}", names, file)

    def values(self, cgroups_path: str, pod_uid: str | None = None) -> dict[str, int | str] | None:
        """``shares``, ``quota`` (-1 = none), ``cpus``, ``memory`` (-1 = none) as read now
        (``pod_uid``: the container's pod, whose cgroup it must be below)."""
        names = self._names(cgroups_path, pod_uid)
        if names is None:
            return None
        out: dict[str, int | str] = {}
        read = self._read
        if self.v2:
            weight, cpu_max = (read("cpu", names, f) for f in ("cpu.weight", "cpu.max"))
            if weight is not None and weight.isdigit():
                out["weight"] = int(weight)
            if cpu_max:
                first = cpu_max.split()[0]
                if first == "max" or first.isdigit():
                    out["quota"] = -1 if first == "max" else int(first)
            memory = read("memory", names, "memory.max")
            if memory and (memory == "max" or memory.isdigit()):
                out["memory"] = -1 if memory == "max" else int(memory)
            cpus = read("cpuset", names, "cpuset.cpus")
        else:
            shares = read("cpu", names, "cpu.shares")
            quota = read("cpu", names, "cpu.cfs_quota_us")
            memory = read("memory", names, "memory.limit_in_bytes")
            cpus = read("cpuset", names, "cpuset.cpus")
            if shares is not None and shares.isdigit():
                out["shares"] = int(shares)
            if quota is not None and quota.lstrip("-").isdigit():
                out["quota"] = int(quota)
            if memory is not None and memory.isdigit():
                out["memory"] = -1 if int(memory) >= V1_UNLIMITED_MEMORY else int(memory)
        if cpus:
            out["cpus"] = cpus
        return out or None

    def pids(self, cgroups_path: str, pod_uid: str | None = None) -> list[int]:
        """The processes in the container's own cgroup (empty if it is gone, or outside)."""
        names = self._names(cgroups_path, pod_uid)
        if names is None:
            return []
        text = self._read("cpu", names, "cgroup.procs")
        return [int(p) for p in text.split() if p.isdigit()] if text else []
