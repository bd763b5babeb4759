"""A container's CPU and memory values and its processes, read from its cgroup (for the
reconciler).

Owns reading ``shares``/``weight``, ``quota``, ``cpus`` and ``memory`` of one container's
cgroup, v1 or v2, and its ``cgroup.procs``. Must not write anything or raise: what cannot be
read is left out.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from policy_server.node.cgroup_layout import (
    V1_UNLIMITED_MEMORY,
    CgroupVersion,
    container_dir,
    read_text,
)


class ContainerFiles:
    """The containers' cgroups under ``root`` (cgroup ``version``, 1 or 2)."""

    def __init__(self, root: Path, version: CgroupVersion) -> None:
        self.root = root
        self.v2 = version is CgroupVersion.V2

    def _dir(self, controller: str, rel: PurePosixPath) -> Path:
        return self.root / rel if self.v2 else self.root / controller / rel

    def values(self, cgroups_path: str) -> dict[str, int | str] | None:
        """``shares``, ``quota`` (-1 = none), ``cpus``, ``memory`` (-1 = none) as read now."""
        try:
            rel = container_dir(cgroups_path)
        except ValueError:
            return None
        out: dict[str, int | str] = {}
        if self.v2:
            weight, cpu_max = (
                read_text(self._dir("cpu", rel) / f) for f in ("cpu.weight", "cpu.max")
            )
            if weight is not None and weight.isdigit():
                out["weight"] = int(weight)
            if cpu_max:
                first = cpu_max.split()[0]
                if first == "max" or first.isdigit():
                    out["quota"] = -1 if first == "max" else int(first)
            memory = read_text(self._dir("memory", rel) / "memory.max")
            if memory and (memory == "max" or memory.isdigit()):
                out["memory"] = -1 if memory == "max" else int(memory)
            cpus = read_text(self._dir("cpuset", rel) / "cpuset.cpus")
        else:
            shares = read_text(self._dir("cpu", rel) / "cpu.shares")
            quota = read_text(self._dir("cpu", rel) / "cpu.cfs_quota_us")
            memory = read_text(self._dir("memory", rel) / "memory.limit_in_bytes")
            cpus = read_text(self._dir("cpuset", rel) / "cpuset.cpus")
            if shares is not None and shares.isdigit():
                out["shares"] = int(shares)
            if quota is not None and quota.lstrip("-").isdigit():
                out["quota"] = int(quota)
            if memory is not None and memory.isdigit():
                out["memory"] = -1 if int(memory) >= V1_UNLIMITED_MEMORY else int(memory)
        if cpus:
            out["cpus"] = cpus
        return out or None

    def pids(self, cgroups_path: str) -> list[int]:
        """The processes in the container's cgroup (empty if it is gone)."""
        try:
            rel = container_dir(cgroups_path)
        except ValueError:
            return []
        text = read_text(self._dir("cpu", rel) / "cgroup.procs")
        return [int(p) for p in text.split()] if text else []
