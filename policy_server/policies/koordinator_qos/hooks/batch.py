"""BatchResource (docs/koordinator.md#batchresource): BE containers' shares/quota/memory from batch
resources.

Only pods labelled exactly ``BE``. Container values come from this container's entry in
``node.koordinator.sh/extended-resource-spec``; pod values (RunPodSandbox, a pod-cgroup write)
are sums over all entries. A missing/unparsable annotation changes nothing, as in koordlet
(reported as a warning, not a hook error).
"""

from __future__ import annotations

from collections.abc import Mapping

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.annotations import (
    AnnotationError,
    ContainerBatchSpec,
    extended_resource_spec,
)
from policy_server.policies.koordinator_qos.formulas import (
    memory_limit,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    scale_quota,
)
from policy_server.policies.koordinator_qos.qos import QOSClass
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


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    if target.pod.qos is not QOSClass.BE:
        return None
    specs, warning = _specs(target.pod)
    if warning is not None:
        return HookResult(warnings=(warning,))
    if specs is None or target.name not in specs:
        return None
    return HookResult(resources=container_resources(specs[target.name], rules))


def pod(target: PodTarget, rules: Rules) -> HookResult | None:
    if target.qos is not QOSClass.BE:
        return None
    specs, warning = _specs(target)
    if warning is not None:
        return HookResult(warnings=(warning,))
    if not specs:
        return None
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
