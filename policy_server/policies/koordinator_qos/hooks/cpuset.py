"""CPUSetAllocator (docs/koordinator.md#cpusetallocator): container cpuset from resource-status or
share pools; quota -1.

Pinned pods (resource-status ``cpuset``) also get CFS quota -1 unless ``disable_unset_cpu_quota``;
at RunPodSandbox that is a pod-cgroup write (an effect), at Create/Update an NRI field. The
annotation is input, not authority (``authority``): unless the rules trust it, the cpuset and the
quota -1 go only to a Guaranteed container with whole CPUs as many as the cpuset holds, and the
pod-cgroup quota only to a Guaranteed pod; a refused cpuset is as if the annotation had none.
A cpuset naming CPUs the node does not have (``NodeFacts.topology``: the kernel would refuse it
and the container would not start) is refused the same way, trusted or not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.annotations import ResourceStatus, resource_status
from policy_server.policies.koordinator_qos.authority import (
    RULE_EXCLUSIVE_CPUSET,
    Refusal,
    exclusive_cpuset_refused,
)
from policy_server.policies.koordinator_qos.qos import KubeQOS, QOSClass
from policy_server.policies.koordinator_qos.rules import CPUSharedPool, Rules
from policy_server.policies.koordinator_qos.target import (
    ContainerTarget,
    HookResult,
    PodTarget,
    Stage,
)
from policy_server.sdk import CgroupWrite, ResourcePatch, canonical_cpu_list


def _join(pools: Iterable[CPUSharedPool]) -> str:
    # koordlet joins the pool strings ("0-7,8-15"); the kernel stores the set, which reads back
    # as "0-15", so we send the canonical form (pool cpusets are checked when rules load).
    joined = ",".join(p.cpuset for p in pools if p.cpuset)
    return canonical_cpu_list(joined) if joined else ""


def _on_nodes(pools: tuple[CPUSharedPool, ...], status: ResourceStatus) -> str:
    """The pools of the NUMA nodes the scheduler listed, in the order it listed them."""
    return _join(p for n in status.numa_nodes for p in pools if p.node == n.node)


def decide_cpuset(target: PodTarget, status: ResourceStatus | None, rules: Rules) -> str | None:
    """The container cpuset; ``None`` = leave alone, ``""`` = koordlet's "clear" (a no-op in NRI).

    First match wins, in koordlet's order (docs/koordinator.md#cpusetallocator steps 1-8).
    """
    if status is not None and status.cpuset:
        return status.cpuset
    topo = rules.topology
    if topo is None:
        return None
    qos = target.qos
    if status is not None and status.numa_aware:
        if qos is not QOSClass.BE:
            return _on_nodes(topo.cpu_shared_pools, status)
        if rules.features.BECPUManager:
            return _on_nodes(topo.be_cpu_shared_pools, status)
    if qos is QOSClass.SYSTEM and topo.system_qos_cpuset:
        return topo.system_qos_cpuset
    if qos is QOSClass.LS:
        return _join(topo.cpu_shared_pools)
    # Only kube-BestEffort pods are "cleared": a BE-labelled Burstable/Guaranteed pod goes on to
    # the kubelet-policy steps below and is confined to the shared pools (koordlet's
    # cpusetRule.getContainerCPUSet checks the kube QoS from the cgroup parent here, not the label).
    if target.kube_qos is KubeQOS.BEST_EFFORT:
        return ""
    if topo.kubelet_cpu_manager_policy == keys.KUBELET_POLICY_STATIC:
        return None
    return _join(topo.cpu_shared_pools)


def _unset_quota(status: ResourceStatus | None, rules: Rules) -> bool:
    return status is not None and bool(status.cpuset) and not rules.disable_unset_cpu_quota


HOOK = "CPUSetAllocator"


def _refusal(target: PodTarget, detail: str) -> Refusal:
    return Refusal(HOOK, target.label, keys.ANNOTATION_RESOURCE_STATUS, RULE_EXCLUSIVE_CPUSET,
                   detail)  # fmt: skip


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    status = resource_status(target.pod.pod.annotations)
    refusals: tuple[Refusal, ...] = ()
    if (
        status is not None
        and status.cpuset
        and not target.pod.trusted(keys.ANNOTATION_RESOURCE_STATUS, rules)
    ):
        kubelet = target.kubelet
        why = exclusive_cpuset_refused(
            target.pod.kube_qos, kubelet.resources, kubelet.current, status.cpuset
        )
        if why is not None:
            refusals = (_refusal(target.pod, f"cpuset {status.cpuset}: {why}"),)
            status = dataclasses.replace(status, cpuset="")
    warnings: tuple[str, ...] = ()
    if status is not None and status.cpuset:
        outside = target.node.topology.cpus_problem(status.cpuset)
        if outside is not None:  # trusted or not: the kernel would refuse it, failing the pod
            warnings = (f"{HOOK}: pod {target.pod.label}: {keys.ANNOTATION_RESOURCE_STATUS} "
                        f"cpuset {outside}; not pinned",)
            status = dataclasses.replace(status, cpuset="")
    cpus = decide_cpuset(target.pod, status, rules)
    patch = ResourcePatch(
        # An empty cpuset means "unset" in NRI, so koordlet's clearing of BE pods is skipped.
        cpu_cpus=cpus or None,
        cpu_quota=keys.UNLIMITED if _unset_quota(status, rules) else None,
    )
    if patch.is_empty() and not refusals and not warnings:
        return None
    return HookResult(resources=patch, refusals=refusals, warnings=warnings)


def pod(target: PodTarget, rules: Rules) -> HookResult | None:
    status = resource_status(target.pod.annotations)
    if not _unset_quota(status, rules):
        return None
    if target.kube_qos is not KubeQOS.GUARANTEED and not target.trusted(
        keys.ANNOTATION_RESOURCE_STATUS, rules
    ):
        why = f"pod cgroup CFS quota -1 needs a Guaranteed pod (kubelet made it {target.kube_qos})"
        return HookResult(refusals=(_refusal(target, why),))
    if not target.pod.cgroup_parent:
        return HookResult(
            warnings=(
                f"CPUSetAllocator: pod {target.label} has no cgroup parent;"
                " cannot unset its CFS quota",
            )
        )
    write = CgroupWrite(target.pod.cgroup_parent, "cpu.cfs_quota_us", keys.UNLIMITED, target.label)
    return HookResult(effects=(write,))
