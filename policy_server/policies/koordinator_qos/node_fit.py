"""Rules that fit the node: every CPU and NUMA node the topology section names exists here.

koordlet reads its NodeResourceTopology from the node it runs on; a rules file is written by
hand and may describe another machine (a 16-CPU example on a 2-CPU node: runc refused every
pinned container, ``cpuset.cpus: numerical result out of range``). So a rules file naming a CPU
the node has not online, or a NUMA node it does not have, is refused at load (the server exits
2) and on reload (the previous rules stay in force, ``/healthz`` shows why), naming the key.

Owns that check. Must not do I/O: the topology comes in (``NodeFacts.topology``; not known:
nothing is checked).
"""

from __future__ import annotations

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.rules import CPUSharedPool, Rules
from policy_server.sdk import NodeTopology, RulesError

_TOPOLOGY = "topology"


def _pools(field: str, pools: tuple[CPUSharedPool, ...], node: NodeTopology) -> None:
    for i, pool in enumerate(pools):
        where = f"{_TOPOLOGY}.{field}[{i}]"
        problem = node.cpus_problem(pool.cpuset)
        if problem is not None:
            raise RulesError(f"{where}.cpuset", problem)
        if node.mems is not None and pool.node not in node.mems:
            raise RulesError(f"{where}.node", node.mems_problem(str(pool.node)) or "")


def check_fits(rules: Rules, node: NodeTopology) -> Rules:
    """``rules`` unchanged if every CPU and NUMA node they name is the node's; else RulesError
    naming the first key that does not fit."""
    topo = rules.topology
    if topo is None:
        return rules
    _pools(keys.ANNOTATION_CPU_SHARED_POOLS, topo.cpu_shared_pools, node)
    _pools(keys.ANNOTATION_BE_CPU_SHARED_POOLS, topo.be_cpu_shared_pools, node)
    for field, suffix, cpus in (
        (keys.ANNOTATION_SYSTEM_QOS_RESOURCE, "cpuset", topo.system_qos_cpuset),
        (keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY, "reservedCPUs", topo.kubelet_reserved_cpus),
    ):
        problem = node.cpus_problem(cpus)
        if problem is not None:
            raise RulesError(f"{_TOPOLOGY}.{field}.{suffix}", problem)
    return rules
