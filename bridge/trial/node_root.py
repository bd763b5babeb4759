"""The simulated node's sysfs and procfs, as files: what the bridge and the private policy
server read the node's topology from in `try` and `test`.

Owns writing, under a directory of ours, `sys/devices/system/cpu/online` (CPUs `0..N-1`),
`sys/devices/system/node/online` with each `node<M>/cpulist` (the CPUs split evenly over
the node's NUMA nodes, in order), `sys/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages`
(none reserved) and `proc/meminfo` (its total memory), from a `NodeSpec`. Rewritten for each trial:
the bridge reads them when a reply sets a cpuset, so a suite's cases may differ in size.
Must not: read the host's (a trial says nothing about the machine it runs on).
"""

from __future__ import annotations

from pathlib import Path

from bridge.contract.cpu_list_grammar import format_cpu_list
from bridge.kube import NodeSpec


def numa_cpus(node: NodeSpec) -> list[list[int]]:
    """The CPUs of each NUMA node: `cpus` split evenly, the first nodes taking the remainder."""
    count = max(1, min(node.numa_nodes, node.cpus))
    share, extra = divmod(node.cpus, count)
    out, first = [], 0
    for i in range(count):
        size = share + (1 if i < extra else 0)
        out.append(list(range(first, first + size)))
        first += size
    return out


def write_node(node: NodeSpec, root: Path) -> Path:
    """The node's files under `root`; returns the sysfs root (`root/sys`)."""
    system = root / "sys" / "devices" / "system"
    (system / "cpu").mkdir(parents=True, exist_ok=True)
    (system / "cpu" / "online").write_text(f"{format_cpu_list(range(node.cpus))}\n")
    nodes = numa_cpus(node)
    (system / "node").mkdir(exist_ok=True)
    (system / "node" / "online").write_text(f"{format_cpu_list(range(len(nodes)))}\n")
    for i, cpus in enumerate(nodes):
        (system / "node" / f"node{i}").mkdir(exist_ok=True)
        (system / "node" / f"node{i}" / "cpulist").write_text(f"{format_cpu_list(cpus)}\n")
    for size in node.hugepage_sizes_bytes:
        pages = root / "sys" / "kernel" / "mm" / "hugepages" / f"hugepages-{size // 1024}kB"
        pages.mkdir(parents=True, exist_ok=True)
        (pages / "nr_hugepages").write_text("0\n")
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc" / "meminfo").write_text(f"MemTotal: {node.memory_bytes // 1024} kB\n")
    return root / "sys"
