"""OOMScoreAdj (docs/koordinator.md#oomscoreadj): ``oom_score_adj`` from pod annotations, at
CreateContainer only.

koordlet's reconciler rewrites /proc/<pid>/oom_score_adj; NRI can only set it for a new
container. An out-of-range or unparsable value is skipped with a warning, as koordlet skips it.
"""

from __future__ import annotations

from policy_server.policies.koordinator_qos.annotations import AnnotationError, oom_score_adj
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import ContainerTarget, HookResult, Stage


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    try:
        value = oom_score_adj(target.pod.pod.annotations, target.name)
    except AnnotationError as exc:
        return HookResult(warnings=(f"OOMScoreAdj: {exc}; skipped",))
    return None if value is None else HookResult(oom_score_adj=value)
