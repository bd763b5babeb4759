"""Resctrl (spec §4.7): ``rdt_class = koordlet-<podUID>`` for pods with a resctrl request.

Creating the group and its schemata (RunPodSandbox) and deleting it (RemovePodSandbox) are
resctrl-filesystem writes outside NRI and outside our cgroup executor: RunPodSandbox only
reports that the group must exist.
"""

from __future__ import annotations

from policy_server.decision import ResourcePatch
from policy_server.koordinator import keys
from policy_server.koordinator.annotations import resctrl_config
from policy_server.koordinator.rules import Rules
from policy_server.koordinator.target import ContainerTarget, HookResult, PodTarget, Stage


def group_name(pod_uid: str) -> str:
    return f"{keys.RESCTRL_GROUP_PREFIX}{pod_uid}"


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    if resctrl_config(target.pod.pod.annotations) is None:
        return None
    return HookResult(resources=ResourcePatch(rdt_class=group_name(target.pod.pod.uid)))


def pod(target: PodTarget, rules: Rules) -> HookResult | None:
    if resctrl_config(target.pod.annotations) is None:
        return None
    return HookResult(
        warnings=(
            f"Resctrl: resctrl group {group_name(target.pod.uid)} is not created by this policy "
            "server; containers of this pod get it as rdt_class",
        )
    )
