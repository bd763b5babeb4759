"""The node's CPU topology for ``cpu-pools``: which CPUs exist, their NUMA node and core.

Owns reading it from sysfs (``/sys/devices/system/cpu``: ``online``, each ``cpuN/nodeM`` link,
``cpuN/topology/{physical_package_id,core_id}``) or from a configured layout (NUMA node ->
CPU list, for nodes whose sysfs the server cannot see, and for tests). Read once, at startup;
errors are ``TopologyError`` naming the file or the layout key. Must not allocate anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from policy_server.sdk import parse_cpu_list

SYSFS_CPU = Path("/sys/devices/system/cpu")
_NODE_LINK = re.compile(r"^node(\d+)$")


class TopologyError(ValueError):
    """The topology could not be read or the layout is invalid."""


@dataclass(frozen=True, slots=True)
class Topology:
    """CPUs by NUMA node, and each CPU's physical core (hyperthreads share one)."""

    nodes: Mapping[int, frozenset[int]]
    core_of: Mapping[int, tuple[int, int]]  # cpu -> (package, core id)
    source: str

    @property
    def cpus(self) -> frozenset[int]:
        return frozenset().union(*self.nodes.values())

    def node_of(self, cpu: int) -> int:
        for node, cpus in self.nodes.items():
            if cpu in cpus:
                return node
        raise KeyError(cpu)

    def siblings(self, cpu: int) -> frozenset[int]:
        """The CPUs on the same physical core as ``cpu`` (itself included)."""
        core = self.core_of[cpu]
        return frozenset(c for c, k in self.core_of.items() if k == core)


def from_layout(layout: Mapping[Any, object]) -> Topology:
    """``{node: "cpu list"}``; every CPU is its own core (a layout does not know threads)."""
    nodes: dict[int, frozenset[int]] = {}
    seen: set[int] = set()
    for key, value in layout.items():
        try:
            node = int(str(key))
        except ValueError:
            raise TopologyError(f"layout: NUMA node {key!r} is not a number") from None
        if node < 0:
            raise TopologyError(f"layout: NUMA node {key!r} is negative")
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise TopologyError(f"layout.{node}: expected a CPU list such as '0-3', got {value!r}")
        try:
            cpus = parse_cpu_list(str(value))
        except ValueError as exc:
            raise TopologyError(f"layout.{node}: {exc}") from None
        overlap = cpus & seen
        if overlap:
            raise TopologyError(f"layout.{node}: CPU {min(overlap)} is in two NUMA nodes")
        seen |= cpus
        nodes[node] = cpus
    if not nodes:
        raise TopologyError("layout: names no NUMA node")
    core_of = {cpu: (node, cpu) for node, cpus in nodes.items() for cpu in cpus}
    return Topology(MappingProxyType(nodes), MappingProxyType(core_of), "configured layout")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii").strip()
    except OSError as exc:
        raise TopologyError(f"cannot read {path}: {exc.strerror or exc}") from None


def _read_int(path: Path, default: int) -> int:
    if not path.exists():
        return default
    text = _read(path)
    try:
        return int(text)
    except ValueError:
        raise TopologyError(f"{path}: expected a number, got {text!r}") from None


def from_sysfs(root: Path = SYSFS_CPU) -> Topology:
    """The online CPUs under ``root`` with their NUMA node (0 when the kernel has no NUMA)."""
    try:
        online = parse_cpu_list(_read(root / "online"))
    except ValueError as exc:
        raise TopologyError(f"{root / 'online'}: {exc}") from None
    nodes: dict[int, set[int]] = {}
    core_of: dict[int, tuple[int, int]] = {}
    for cpu in sorted(online):
        directory = root / f"cpu{cpu}"
        node = 0
        if directory.is_dir():
            links = [m for p in directory.iterdir() if (m := _NODE_LINK.match(p.name))]
            if links:
                node = int(links[0].group(1))
        nodes.setdefault(node, set()).add(cpu)
        package = _read_int(directory / "topology" / "physical_package_id", 0)
        core = _read_int(directory / "topology" / "core_id", cpu)
        core_of[cpu] = (package, core)
    frozen = {node: frozenset(cpus) for node, cpus in sorted(nodes.items())}
    return Topology(MappingProxyType(frozen), MappingProxyType(core_of), str(root))
