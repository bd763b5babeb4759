"""GroupIdentity (docs/koordinator.md#groupidentity): the ``cpu.bvt_warp_ns`` value per pod.

koordlet writes it into the pod cgroup at RunPodSandbox; here that is a pod-cgroup effect the
node executor writes when the kernel has the file (it skips it quietly otherwise; the server
reports the kernel's support once, at start-up and in /v1/state). As an extra NRI mapping we
also set ``unified["cpu.bvt_warp_ns"]`` on each container at CreateContainer and reconcile, only
when the rules declare ``group_identity_kernel_support`` (cgroup v2 kernels that expose the
file) and the node's probe saw the file in the containers' cgroups (``NodeFacts``): runc refuses
any ``unified`` key on cgroup v1 ("cannot use unified on cgroup v1") and, on v2, a key whose file
is missing (``openat2 .../cpu.bvt_warp_ns: no such file or directory`` on a stock kernel), and
either way the container would not start. When the files are not known the key is not sent
either. Otherwise the pod-level write carries the value alone, whatever the rules say; the
server says why once at start-up and in /v1/state, so the hook itself says nothing per event.
An LS pod's ``koordinator.sh/cpuQOS`` is input, not authority (``authority``): unless the rules
trust it, it may lower the class value, never raise it.
"""

from __future__ import annotations

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.annotations import cpu_qos_override
from policy_server.policies.koordinator_qos.authority import (
    RULE_GROUP_IDENTITY_ABOVE_CLASS,
    Refusal,
)
from policy_server.policies.koordinator_qos.qos import KubeQOS, QOSClass
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import (
    ContainerTarget,
    HookResult,
    PodTarget,
    Stage,
)
from policy_server.sdk import BVT_FILE, CgroupWrite, NodeFacts, ResourcePatch


def class_values(rules: Rules) -> tuple[int, int, int]:
    """(LSR, LS, BE) values: a class's groupIdentity if the policy applies and it is enabled."""
    slo = rules.node_slo
    applies = slo.cpu_policy in ("", "groupIdentity")

    def value(enable: bool, group_identity: int) -> int:
        return group_identity if applies and enable else 0

    return (
        value(slo.lsr.enable, slo.lsr.group_identity),
        value(slo.ls.enable, slo.ls.group_identity),
        value(slo.be.enable, slo.be.group_identity),
    )


def bvt_value(target: PodTarget, rules: Rules) -> int:
    """The pod's bvt value; raises ``AnnotationError`` for a bad ``koordinator.sh/cpuQOS``."""
    return bvt_decision(target, rules)[0]


def bvt_decision(target: PodTarget, rules: Rules) -> tuple[int, Refusal | None]:
    """The pod's bvt value and, if the pod's override asked for more than its class, why it
    was not honoured; raises ``AnnotationError`` for a bad ``koordinator.sh/cpuQOS``."""
    lsr, ls, be = class_values(rules)
    if target.qos is QOSClass.LS:
        override = cpu_qos_override(target.pod.annotations)
        if override is None:
            return ls, None
        value = override.group_identity if override.group_identity is not None else ls
        value = value if override.enable else 0
        key = keys.ANNOTATION_CPU_QOS
        if value <= ls or target.trusted(key, rules):
            return value, None
        detail = f"groupIdentity {value} above the LS class's {ls}"
        return ls, Refusal("GroupIdentity", target.label, key, RULE_GROUP_IDENTITY_ABOVE_CLASS,
                           detail)  # fmt: skip
    return _class_value(target, rules, lsr, ls, be), None


def _class_value(target: PodTarget, rules: Rules, lsr: int, ls: int, be: int) -> int:
    qos = target.qos
    if qos in (QOSClass.LSE, QOSClass.LSR):
        return lsr
    if qos is QOSClass.BE:
        return be
    # Unlabeled (and SYSTEM, which has no case of its own): fall back on the kube QoS.
    slo = rules.node_slo
    if target.kube_qos is KubeQOS.GUARANTEED:
        if slo.lsr.enable:
            return lsr
        return ls if slo.ls.enable else 0
    if target.kube_qos is KubeQOS.BURSTABLE:
        return ls
    return be


def _wanted(value: int, rules: Rules) -> bool:
    # New cgroups start at 0, so with the rule off and no pod override there is nothing to do.
    return rules.group_identity_enabled or value != 0


def pod(target: PodTarget, rules: Rules) -> HookResult | None:
    value, refusal = bvt_decision(target, rules)
    refusals = () if refusal is None else (refusal,)
    if not _wanted(value, rules):
        return HookResult(refusals=refusals) if refusals else None
    if not target.pod.cgroup_parent:
        return HookResult(warnings=(f"GroupIdentity: pod {target.label} has no cgroup parent",))
    return HookResult(
        effects=(CgroupWrite(target.pod.cgroup_parent, BVT_FILE, value, target.label),),
        refusals=refusals,
    )


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    value = bvt_value(target.pod, rules)
    if stage is Stage.CREATE_CONTAINER and not _wanted(value, rules):
        return None
    if not container_mapping(rules, target.node):
        return None  # the pod-level write carries it (containers run inside the pod group)
    return HookResult(resources=ResourcePatch(unified={BVT_FILE: str(value)}))


def container_mapping(rules: Rules, node: NodeFacts) -> bool:
    """Whether containers get ``unified["cpu.bvt_warp_ns"]``: declared, and the node is known
    to have the file in its containers' cgroups."""
    return rules.group_identity_kernel_support and node.has_cgroup_file(BVT_FILE)
