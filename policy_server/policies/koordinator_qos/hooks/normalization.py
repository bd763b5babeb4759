"""CPUNormalization (docs/koordinator.md#cpunormalization): scale LS/unlabeled containers' CFS quota
by the node ratio.

The base is the container's own quota (CreateContainer), the requested quota (UpdateContainer,
where koordlet would read the current one), or the unscaled quota remembered from those events
(reconcile). A pod without a label but with a resource-status cpuset counts as LSR: untouched.
With ``cpu_normalization_via: node`` nothing goes through NRI (the runtime would record the
scaled quota and kubelet report it back): the pod cgroup's quota is written beside the runtime
(``pod_quota``, the node plan), as koordlet writes its cgroups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.annotations import AnnotationError, resource_status
from policy_server.policies.koordinator_qos.formulas import scale_quota
from policy_server.policies.koordinator_qos.qos import QOSClass
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import (
    ContainerTarget,
    HookResult,
    PodTarget,
    Stage,
)
from policy_server.sdk import ResourcePatch

UNKNOWN_BASE = (
    "CPUNormalization: unscaled CFS quota unknown (container not seen at CreateContainer or "
    "UpdateContainer by this server); quota left as is"
)


def applies(target: ContainerTarget) -> bool:
    """LS pods, and unlabeled pods that are not pinned by the scheduler."""
    return pod_applies(target.pod)


def pod_applies(target: PodTarget) -> bool:
    """``applies`` for a pod."""
    qos = target.qos
    if qos is QOSClass.LS:
        return True
    if qos is not QOSClass.NONE:
        return False
    try:
        status = resource_status(target.pod.annotations)
    except AnnotationError:
        # koordlet's normalization carries on when the resource-status cannot be parsed: the
        # pod is simply not known to be pinned (CPUSetAllocator reports the bad annotation).
        return True
    return status is None or not status.cpuset


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    ratio = rules.cpu_normalization_ratio
    if rules.cpu_normalization_via == keys.NORMALIZE_VIA_NODE:
        return None  # not through the runtime: see the module docstring
    if ratio is None and stage is not Stage.RECONCILE:
        return None
    if not applies(target):
        return None
    base = target.quota
    if base is None and stage is Stage.RECONCILE and ratio is not None:
        return HookResult(warnings=(UNKNOWN_BASE,))
    if base is None or base <= 0:
        return None
    if stage is not Stage.RECONCILE and (ratio is None or ratio <= 1.0):
        # koordlet re-emits the unchanged quota here; for a new or updated container that is a
        # no-op, so we leave it out (it would only show up as a conflict with other hooks).
        return None
    # Reconcile recomputes from the unscaled base, so removing the ratio or lowering it to <= 1
    # restores the original quota on running containers.
    return HookResult(resources=ResourcePatch(cpu_quota=scale_quota(base, ratio)))


def pod_quota(target: PodTarget, container_ids: Iterable[str], baselines: Mapping[str, int],
              rules: Rules) -> int | None:
    """The pod cgroup's normalized ``cpu.cfs_quota_us``: its containers' unscaled quotas
    summed (kubelet's pod limit) and scaled like each container's; None when there is nothing
    to scale (no ratio > 1, a container without a quota or not known, a pod not normalized)."""
    ratio = rules.cpu_normalization_ratio
    if ratio is None or ratio <= 1.0 or not pod_applies(target):
        return None
    quotas = [baselines.get(cid) for cid in container_ids]
    if not quotas or any(q is None or q <= 0 for q in quotas):
        return None
    return scale_quota(sum(q for q in quotas if q is not None), ratio)
