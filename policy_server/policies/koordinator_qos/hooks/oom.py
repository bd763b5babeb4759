"""OOMScoreAdj (docs/koordinator.md#oomscoreadj): ``oom_score_adj`` from pod annotations, at
CreateContainer only.

koordlet's reconciler rewrites /proc/<pid>/oom_score_adj; NRI can only set it for a new
container. An out-of-range or unparsable value is skipped with a warning, as koordlet skips it.
The annotation is input, not authority (``authority``): unless the rules trust it, a value below
kubelet's (the container's own ``oom_score_adj`` in the request, and never below the lowest of
its kube QoS class: Guaranteed -997, Burstable 3, BestEffort 1000) is refused.
"""

from __future__ import annotations

from policy_server.policies.koordinator_qos.annotations import AnnotationError, oom_score_adj_from
from policy_server.policies.koordinator_qos.authority import (
    RULE_OOM_BELOW_KUBELET,
    Refusal,
    kubelet_oom_floor,
)
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import (
    ContainerTarget,
    HookResult,
    PodTarget,
    Stage,
)

HOOK = "OOMScoreAdj"


def decide(
    target: PodTarget, name: str, kubelet: int | None, rules: Rules
) -> tuple[int | None, Refusal | None]:
    """The value for container ``name`` (kubelet gave it ``kubelet``), or the refusal;
    raises ``AnnotationError``."""
    found = oom_score_adj_from(target.pod.annotations, name)
    if found is None:
        return None, None
    value, key = found
    floor = kubelet_oom_floor(target.kube_qos, kubelet)
    if value >= floor or target.trusted(key, rules):
        return value, None
    detail = (
        f"container {name}: oom_score_adj {value} below kubelet's {floor} "
        f"(a {target.kube_qos.value} pod)"
    )
    return None, Refusal(HOOK, target.label, key, RULE_OOM_BELOW_KUBELET, detail)


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    try:
        value, refusal = decide(target.pod, target.name, target.kubelet.oom_score_adj, rules)
    except AnnotationError as exc:
        return HookResult(warnings=(f"OOMScoreAdj: {exc}; skipped",))
    if refusal is not None:
        return HookResult(refusals=(refusal,))
    return None if value is None else HookResult(oom_score_adj=value)
