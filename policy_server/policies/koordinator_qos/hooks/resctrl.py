"""Resctrl (docs/koordinator.md#resctrl): the per-pod resctrl group ``koordlet-<podUID>`` and its
``rdt_class``.

RunPodSandbox asks for the group with its schemata (a ``ResctrlGroup`` effect the node executor
creates); CreateContainer sets ``rdt_class`` and asks for the same group again, so the server can
drop ``rdt_class`` from the reply when the group could not be made (a container must never
point at a class that does not exist); RemovePodSandbox asks for the group's removal.
"""

from __future__ import annotations

from policy_server.policies.koordinator_qos.annotations import resctrl_config
from policy_server.policies.koordinator_qos.resctrl_schemata import group_name, resctrl_group
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import (
    ContainerTarget,
    HookResult,
    PodTarget,
    Stage,
)
from policy_server.sdk import ResctrlGroupRemoval, ResourcePatch

__all__ = ["container", "group_name", "pod", "remove_pod"]


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    pod = target.pod.pod
    config = resctrl_config(pod.annotations)
    if config is None:
        return None
    group = resctrl_group(config, pod.uid, target.pod.label)
    return HookResult(resources=ResourcePatch(rdt_class=group.name), effects=(group,))


def pod(target: PodTarget, rules: Rules) -> HookResult | None:
    config = resctrl_config(target.pod.annotations)
    if config is None:
        return None
    return HookResult(effects=(resctrl_group(config, target.pod.uid, target.label),))


def remove_pod(target: PodTarget, rules: Rules) -> HookResult | None:
    # koordlet removes the group only for pods that carry the annotation.
    if resctrl_config(target.pod.annotations) is None:
        return None
    return HookResult(effects=(ResctrlGroupRemoval(group_name(target.pod.uid), target.label),))
