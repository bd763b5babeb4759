"""Reading one of the kernel's CPU or memory-node list files (sysfs), as both products do.

Owns the read: `<sysfs>/devices/system/cpu/online`, `.../node/online`, `.../node<N>/cpulist`
hold one list in the contract's grammar (bridge.contract.cpu_list_grammar, which must not read
files itself) and a newline. The bridge bounds a reply's cpuset by them
(bridge.webhooks.node_cpusets); the policy server reads the node's topology from them
(policy_server.node.node_topology). Must not: raise. A file that is missing, unreadable, not
ASCII or not a list is "not known" (None), and nothing is checked against it; an empty file
(a node with no CPUs online) is the empty set.
"""

from __future__ import annotations

from pathlib import Path

from bridge.contract.cpu_list_grammar import CpuListError, parse_cpu_list


def read_cpu_list(path: Path) -> frozenset[int] | None:
    """The ids the list file at `path` names; None when it cannot be read as a list."""
    try:
        text = path.read_text(encoding="ascii").strip()
        return parse_cpu_list(text) if text else frozenset()
    except (OSError, UnicodeDecodeError, CpuListError):
        return None
