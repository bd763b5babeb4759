"""Which free CPUs an exclusive container gets: topology-aware, deterministic, pure.

The rules, in the spirit of CRI-RM's topology-aware policy and kubelet's static CPU manager:
1. fit the request into one NUMA node if any node has enough free CPUs, choosing the node with
   the fewest free CPUs that still fits (best fit keeps big holes for big requests);
2. otherwise spread over as few nodes as possible, taking the nodes with most free CPUs first;
3. inside a node take whole free physical cores while the request fills one (a thread whose
   sibling runs someone else's work is noisier), then single threads, those of cores that are
   already split first; lowest ids first.
Must not know about containers or events.
"""

from __future__ import annotations

from policy_server.policies.cpu_pools.topology import Topology


def _pick(topology: Topology, node: int, free: frozenset[int], count: int) -> list[int]:
    """Up to ``count`` free CPUs of ``node``: whole free cores while the request still fills
    one, then single threads, those of already split cores first (kubelet does the same)."""
    mine = free & topology.nodes[node]
    cores: dict[tuple[int, int], list[int]] = {}
    for cpu in sorted(mine):
        cores.setdefault(topology.core_of[cpu], []).append(cpu)
    whole = [cpus for core, cpus in sorted(cores.items()) if topology.siblings(cpus[0]) <= mine]
    split = [cpu for core, cpus in sorted(cores.items()) for cpu in cpus if cpus not in whole]
    chosen: list[int] = []
    for cpus in whole:
        if len(cpus) <= count - len(chosen):
            chosen.extend(cpus)
    rest = split + [cpu for cpus in whole for cpu in cpus if cpu not in chosen]
    chosen.extend(rest[: count - len(chosen)])
    return chosen


def take(topology: Topology, free: frozenset[int], count: int) -> frozenset[int] | None:
    """``count`` CPUs out of ``free``, or None if there are not that many."""
    if count <= 0 or len(free) < count:
        return None
    free_in = {node: len(free & cpus) for node, cpus in topology.nodes.items()}
    fitting = [node for node, n in free_in.items() if n >= count]
    if fitting:
        node = min(fitting, key=lambda nd: (free_in[nd], nd))
        return frozenset(_pick(topology, node, free, count))
    chosen: list[int] = []
    for node in sorted(free_in, key=lambda nd: (-free_in[nd], nd)):
        chosen.extend(_pick(topology, node, free, count - len(chosen)))
        if len(chosen) == count:
            break
    return frozenset(chosen)
