"""BatchResource (docs/koordinator.md#batchresource): BE containers' shares/quota/memory from batch
resources.

Only pods labelled exactly ``BE``. Container values come from this container's entry in
``node.koordinator.sh/extended-resource-spec``; pod values (RunPodSandbox, a pod-cgroup write)
are sums over all entries. A missing/unparsable annotation changes nothing, as in koordlet
(reported as a warning, not a hook error).

The annotation is input, not authority (``authority``): unless the rules trust it, a batch value
only lowers what kubelet set (CFS quota and memory limit lowered, never raised or removed, so a
missing batch limit leaves kubelet's; cpu shares raised only for a kube-BestEffort pod, which
kubelet's BestEffort level bounds), and the pod-cgroup values are written for kube-BestEffort
pods only (kubelet set no limit there).
"""

from __future__ import annotations

from collections.abc import Mapping

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.annotations import (
    AnnotationError,
    ContainerBatchSpec,
    extended_resource_spec,
)
from policy_server.policies.koordinator_qos.authority import (
    RULE_BATCH_POD_LEVEL,
    RULE_LIMIT_ABOVE_KUBELET,
    Refusal,
    limit_allowed,
)
from policy_server.policies.koordinator_qos.formulas import (
    memory_limit,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    scale_quota,
)
from policy_server.policies.koordinator_qos.qos import KubeQOS, QOSClass
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import (
    ContainerTarget,
    HookResult,
    PodTarget,
    Stage,
)
from policy_server.sdk import CgroupWrite, ResourcePatch


def _quota(milli_cpu: int, rules: Rules) -> int:
    if rules.cfs_quota_disabled:
        return keys.UNLIMITED
    return scale_quota(milli_cpu_to_quota(milli_cpu), rules.cpu_normalization_ratio)


def container_resources(spec: ContainerBatchSpec, rules: Rules) -> ResourcePatch:
    """The container formulas."""
    return ResourcePatch(
        cpu_shares=milli_cpu_to_shares(spec.requests.batch_cpu or 0),
        cpu_quota=_quota(spec.limits.batch_cpu or 0, rules),
        memory_limit=memory_limit(spec.limits.batch_memory or 0),
    )


def pod_resources(specs: Mapping[str, ContainerBatchSpec], rules: Rules) -> tuple[int, int, int]:
    """The pod formulas: (shares, quota, memory limit) summed over the annotation's containers."""
    shares = milli_cpu_to_shares(
        sum(v for s in specs.values() if (v := s.requests.batch_cpu or 0) > 0)
    )
    cpu_limits = [s.limits.batch_cpu or 0 for s in specs.values()]
    if rules.cfs_quota_disabled or any(v <= 0 for v in cpu_limits):
        quota = keys.UNLIMITED
    else:
        quota = _quota(sum(cpu_limits), rules)
    mem_limits = [s.limits.batch_memory or 0 for s in specs.values()]
    memory = keys.UNLIMITED if any(v <= 0 for v in mem_limits) else sum(mem_limits)
    return shares, quota, memory_limit(memory)


def _specs(target: PodTarget) -> tuple[Mapping[str, ContainerBatchSpec] | None, str | None]:
    try:
        return extended_resource_spec(target.pod.annotations), None
    except AnnotationError as exc:
        return None, f"BatchResource: {exc}; batch resources not applied to {target.label}"


HOOK = "BatchResource"
KEY = keys.ANNOTATION_EXTENDED_RESOURCE_SPEC


def bounded(
    wanted: ResourcePatch, target: ContainerTarget
) -> tuple[ResourcePatch, tuple[Refusal, ...]]:
    """``wanted`` without what would give the container more than kubelet did."""
    kubelet = target.kubelet.resources
    cpu = kubelet.cpu if kubelet is not None else None
    refused: list[str] = []
    quota, memory, shares = wanted.cpu_quota, wanted.memory_limit, wanted.cpu_shares
    if quota is not None and not limit_allowed(cpu.quota if cpu else None, quota):
        refused.append(f"cpu quota {quota} above kubelet's {cpu.quota if cpu else None}")
        quota = None
    kubelet_memory = kubelet.memory.limit if kubelet is not None else None
    if memory is not None and not limit_allowed(kubelet_memory, memory):
        refused.append(f"memory limit {memory} above kubelet's {kubelet_memory}")
        memory = None
    kubelet_shares = cpu.shares if cpu is not None else None
    best_effort = target.pod.kube_qos is KubeQOS.BEST_EFFORT
    above = kubelet_shares is None or (shares is not None and shares > kubelet_shares)
    if shares is not None and not best_effort and above:
        refused.append(f"cpu shares {shares} above kubelet's {kubelet_shares}")
        shares = None
    refusals = tuple(
        Refusal(HOOK, target.pod.label, KEY, RULE_LIMIT_ABOVE_KUBELET, detail)
        for detail in refused
    )
    patch = ResourcePatch(cpu_shares=shares, cpu_quota=quota, memory_limit=memory)
    return patch, refusals


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    if target.pod.qos is not QOSClass.BE:
        return None
    specs, warning = _specs(target.pod)
    if warning is not None:
        return HookResult(warnings=(warning,))
    if specs is None or target.name not in specs:
        return None
    wanted = container_resources(specs[target.name], rules)
    if target.pod.trusted(KEY, rules):
        return HookResult(resources=wanted)
    patch, refusals = bounded(wanted, target)
    return HookResult(resources=patch, refusals=refusals)


def pod(target: PodTarget, rules: Rules) -> HookResult | None:
    if target.qos is not QOSClass.BE:
        return None
    specs, warning = _specs(target)
    if warning is not None:
        return HookResult(warnings=(warning,))
    if not specs:
        return None
    if target.kube_qos is not KubeQOS.BEST_EFFORT and not target.trusted(KEY, rules):
        why = f"pod cgroup values need a kube-BestEffort pod (kubelet made it {target.kube_qos})"
        return HookResult(refusals=(Refusal(HOOK, target.label, KEY, RULE_BATCH_POD_LEVEL, why),))
    parent = target.pod.cgroup_parent
    if not parent:
        return HookResult(warnings=(f"BatchResource: pod {target.label} has no cgroup parent",))
    shares, quota, memory = pod_resources(specs, rules)
    return HookResult(
        effects=(
            CgroupWrite(parent, "cpu.shares", shares, target.label),
            CgroupWrite(parent, "cpu.cfs_quota_us", quota, target.label),
            CgroupWrite(parent, "memory.limit_in_bytes", memory, target.label),
        )
    )
