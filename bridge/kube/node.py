"""The node `try` pretends to be: capacity, cgroup setup, labels and annotations.

Owns: NodeSpec (the values kubelet's rules read from the machine) and its defaults.
Must not: apply the rules.
"""

from __future__ import annotations

from dataclasses import dataclass

CGROUP_DRIVERS = ("cgroupfs", "systemd")
CGROUP_VERSIONS = (1, 2)
DEFAULT_NODE_CPUS = 8
DEFAULT_NODE_MEMORY_BYTES = 32 << 30
DEFAULT_NODE_NAME = "try-node"
# Hugepage sizes the node supports; kubelet gives every container a limit for each (0 unless
# requested). x86-64's two sizes.
DEFAULT_HUGEPAGE_SIZES_BYTES = (2 << 20, 1 << 30)


@dataclass(frozen=True, slots=True)
class NodeSpec:
    cpus: int = DEFAULT_NODE_CPUS
    memory_bytes: int = DEFAULT_NODE_MEMORY_BYTES
    cgroup_driver: str = "cgroupfs"
    cgroup_version: int = 2
    name: str = DEFAULT_NODE_NAME
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    hugepage_sizes_bytes: tuple[int, ...] = DEFAULT_HUGEPAGE_SIZES_BYTES
    numa_nodes: int = 1  # the CPUs split evenly over them (bridge.trial.node_root)
