"""Facts about the node the policy server runs on, found out once at start-up.

Owns ``NodeFacts``: what a policy may need to know about the host to answer correctly, but
cannot see in an event. runc writes every ``unified`` key of a container's resources into a
file of the container's cgroup, so a key the node cannot take stops the container from
starting: on cgroup v1 runc refuses them all ("cannot use unified on cgroup v1"); on cgroup v2
it opens ``<container cgroup>/<key>`` and fails on a file the kernel does not provide
(``unable to set unified resource "cpu.bvt_warp_ns": openat2 ...: no such file or directory``
on a stock kernel). So the facts carry the cgroup version and, on v2, the interface files a
container's cgroup has. The server builds them from its own probe (``--cgroup-root``,
``--cgroup-version``); handlers read them as ``NodeView.facts``, koordinator-qos
through its context. The node's topology (``NodeTopology``: online CPUs, NUMA nodes, memory,
read by ``policy_server.node.node_topology`` from ``--sys-root`` and ``--proc-root``) bounds every
cpuset a policy's configuration names: the kernel refuses a CPU or memory node the machine does
not have, so the runtime fails the container. Must not do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bridge.contract.cpu_list_grammar import CpuListError, format_cpu_list, parse_cpu_list

CgroupVersionFact = Literal[1, 2] | None


def _ids(ids: frozenset[int]) -> str:
    return format_cpu_list(ids) if ids else "none"


@dataclass(frozen=True, slots=True)
class NodeTopology:
    """Online CPUs, memory (NUMA) nodes with their CPUs, total memory; ``None``: not known."""

    cpus: frozenset[int] | None = None
    mems: frozenset[int] | None = None
    node_cpus: tuple[tuple[int, frozenset[int]], ...] = ()
    memory_bytes: int | None = None

    def cpus_problem(self, cpus: str) -> str | None:
        """Why the CPU list ``cpus`` cannot be set on this node, or None (also: not known)."""
        return _outside(cpus, self.cpus, "CPU", "online CPUs")

    def mems_problem(self, mems: str) -> str | None:
        """Why the memory-node list ``mems`` cannot be set on this node, or None."""
        return _outside(mems, self.mems, "memory node", "memory nodes")

    def to_json(self) -> dict[str, Any]:
        return {
            "cpus": None if self.cpus is None else format_cpu_list(self.cpus),
            "mems": None if self.mems is None else format_cpu_list(self.mems),
            "node_cpus": {str(n): format_cpu_list(c) for n, c in self.node_cpus},
            "memory_bytes": self.memory_bytes,
        }


def _outside(text: str, have: frozenset[int] | None, what: str, whole: str) -> str | None:
    if have is None or not text.strip():
        return None
    try:
        wanted = parse_cpu_list(text.strip())
    except CpuListError:
        return None  # the grammar's check names it
    missing = wanted - have
    if not missing:
        return None
    plural = "s" if len(missing) > 1 else ""
    return (f"{text.strip()!r} names {what}{plural} {_ids(frozenset(missing))} the node does "
            f"not have (its {whole}: {_ids(have)})")


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What is known about the node; ``None`` means "not known" (the server cannot see it).

    ``cgroup_files``: on cgroup v2, the interface files (``cpu.weight``, ``cpu.idle``, ...) a
    container's cgroup has on this node, as the probe found them in the kubepods cgroup; ``None``
    when nobody looked (facts built by hand, the test kit's default) or the server could not.
    """

    cgroup_version: CgroupVersionFact = None
    cgroup_files: frozenset[str] | None = None
    topology: NodeTopology = NodeTopology()

    @property
    def unified_allowed(self) -> bool:
        """False on cgroup v1, where the runtime rejects a container with ``unified`` keys."""
        return self.cgroup_version != 1

    def has_cgroup_file(self, name: str) -> bool:
        """True only when the probe saw ``name`` among a container cgroup's files (cgroup v2).

        The question to ask before setting ``unified[name]``: a missing file stops the
        container, so "not known" (files not probed) answers False, like cgroup v1.
        """
        return self.unified_allowed and self.cgroup_files is not None and name in self.cgroup_files

    def lacks_cgroup_file(self, name: str) -> bool:
        """True when ``unified[name]`` is known to fail: cgroup v1, or a probed cgroup v2 node
        whose containers have no such file. False when it cannot be told (nothing probed)."""
        if not self.unified_allowed:
            return True
        return self.cgroup_files is not None and name not in self.cgroup_files

    def to_json(self) -> dict[str, Any]:
        files = None if self.cgroup_files is None else sorted(self.cgroup_files)
        return {
            "cgroup_version": self.cgroup_version,
            "unified_allowed": self.unified_allowed,
            "cgroup_files": files,
            "topology": self.topology.to_json(),
        }


UNKNOWN_NODE = NodeFacts()
