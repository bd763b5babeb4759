"""Resctrl (docs/koordinator.md#resctrl): the per-pod resctrl group ``koordlet-<podUID>`` and its
``rdt_class``.

RunPodSandbox asks for the group with its schemata (a ``ResctrlGroup`` effect the node executor
creates); CreateContainer sets ``rdt_class`` and asks for the same group again, so the server can
drop ``rdt_class`` from the reply when the group could not be made (a container must never
point at a class that does not exist); RemovePodSandbox asks for the group's removal. The
annotation is input, not authority (``authority``): unless the rules trust it, a group asking
for more LLC or memory bandwidth than the pod's class group gets (NodeSLO ``resctrlQOS`` of its
class: LLC range, ``mbaPercent``) is refused, and neither the group nor ``rdt_class`` is asked
for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.annotations import resctrl_config
from policy_server.policies.koordinator_qos.authority import (
    RULE_RESCTRL_ABOVE_CLASS,
    Refusal,
    ResctrlBound,
    resctrl_refused,
)
from policy_server.policies.koordinator_qos.qos import QOSClass, default_qos
from policy_server.policies.koordinator_qos.resctrl_schemata import group_name, resctrl_group
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import (
    ContainerTarget,
    HookResult,
    PodTarget,
    Stage,
)
from policy_server.sdk import ResctrlGroup, ResctrlGroupRemoval, ResourcePatch

__all__ = ["class_bound", "container", "group_name", "pod", "remove_pod"]

_CLASS_KEYS = {
    QOSClass.LSE: "lsrClass",
    QOSClass.LSR: "lsrClass",
    QOSClass.LS: "lsClass",
    QOSClass.BE: "beClass",
    QOSClass.SYSTEM: "systemClass",
}


def class_bound(target: PodTarget, rules: Rules) -> tuple[str, ResctrlBound]:
    """The pod's class (an unlabeled pod: its kube QoS class's default) and that class's
    configured ``resctrlQOS`` (after koordlet's merge: a disabled class gets 0-100 %, 100)."""
    qos = target.qos if target.qos is not QOSClass.NONE else default_qos(target.kube_qos)
    key = _CLASS_KEYS[qos]
    strategy: Mapping[str, Any] = rules.node_slo.spec.get("resourceQOSStrategy", {})
    section: Mapping[str, Any] = strategy.get(key, {}).get("resctrlQOS", {})
    default = ResctrlBound()
    return key, ResctrlBound(
        int(section.get("catRangeStartPercent", default.cat_start)),
        int(section.get("catRangeEndPercent", default.cat_end)),
        int(section.get("mbaPercent", default.mba)),
    )


def _group(target: PodTarget, rules: Rules) -> tuple[ResctrlGroup | None, Refusal | None]:
    """The pod's group, or ``None`` and why not (nothing asked, or more than its class gets)."""
    config = resctrl_config(target.pod.annotations)
    if config is None:
        return None, None
    group = resctrl_group(config, target.pod.uid, target.label)
    if target.trusted(keys.ANNOTATION_RESCTRL, rules):
        return group, None
    class_key, bound = class_bound(target, rules)
    why = resctrl_refused(group, bound, class_key)
    if why is None:
        return group, None
    refusal = Refusal("Resctrl", target.label, keys.ANNOTATION_RESCTRL, RULE_RESCTRL_ABOVE_CLASS,
                      why)  # fmt: skip
    return None, refusal


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    group, refusal = _group(target.pod, rules)
    if refusal is not None:
        return HookResult(refusals=(refusal,))
    if group is None:
        return None
    return HookResult(resources=ResourcePatch(rdt_class=group.name), effects=(group,))


def pod(target: PodTarget, rules: Rules) -> HookResult | None:
    group, refusal = _group(target, rules)
    if refusal is not None:
        return HookResult(refusals=(refusal,))
    return HookResult(effects=(group,)) if group is not None else None


def remove_pod(target: PodTarget, rules: Rules) -> HookResult | None:
    # koordlet removes the group only for pods that carry the annotation.
    if resctrl_config(target.pod.annotations) is None:
        return None
    return HookResult(effects=(ResctrlGroupRemoval(group_name(target.pod.uid), target.label),))
