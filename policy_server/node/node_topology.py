"""The node's topology as the kernel shows it: online CPUs, NUMA nodes and memory.

Owns reading ``<sys_root>/devices/system/cpu/online``, ``<sys_root>/devices/system/node/online``
(with each ``node<N>/cpulist``) and the total memory in ``<proc_root>/meminfo``, once at start-up,
into the SDK's ``NodeTopology``. A kernel without NUMA (``CONFIG_NUMA`` off) has no
``devices/system/node``: its one memory node is 0, holding every online CPU. A cpuset naming a
CPU or memory node outside these is refused by the kernel (runc: ``cpuset.cpus: numerical result
out of range``), so rules and replies are checked against them.

Must not: write anything, or fail the server: a part that cannot be read is ``None`` ("not
known"), and nothing is checked against it.
"""

from __future__ import annotations

from pathlib import Path

from bridge.node_cpu_lists import read_cpu_list
from policy_server.sdk.node_facts import NodeTopology

DEFAULT_SYS_ROOT = Path("/sys")


def _memory_bytes(meminfo: Path) -> int | None:
    try:
        lines = meminfo.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if name == "MemTotal" and fields and fields[0].isdigit():
            return int(fields[0]) * 1024  # the kernel says kB and means KiB
    return None


def read_topology(sys_root: Path, proc_root: Path) -> NodeTopology:
    """What ``sys_root`` and ``proc_root`` say about the node (unknown parts ``None``)."""
    cpus = read_cpu_list(sys_root / "devices" / "system" / "cpu" / "online")
    node_dir = sys_root / "devices" / "system" / "node"
    mems: frozenset[int] | None
    node_cpus: dict[int, frozenset[int]] = {}
    if node_dir.is_dir():
        mems = read_cpu_list(node_dir / "online")
        for node in sorted(mems or ()):
            listed = read_cpu_list(node_dir / f"node{node}" / "cpulist")
            if listed is not None:
                node_cpus[node] = listed
    elif cpus is not None:
        mems = frozenset({0})  # no NUMA: one node, every CPU
        node_cpus[0] = cpus
    else:
        mems = None
    return NodeTopology(cpus=cpus, mems=mems, node_cpus=tuple(sorted(node_cpus.items())),
                        memory_bytes=_memory_bytes(proc_root / "meminfo"))
