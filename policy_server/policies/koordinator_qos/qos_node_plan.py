"""What koordlet's reconciler keeps on a node besides cgroup values: a pure plan.

Owns koordinator-qos's reconcile hook (``plan``: the SDK ``NodePlan`` the framework's node
reconciler carries out on every pass) and node needs (``needs``), built from these decisions:
the OOM score each container's processes should have (``OOMScoreAdj``,
docs/koordinator.md#oomscoreadj), the core-scheduling group of each container (``CoreSched``,
docs/koordinator.md#coresched), the kube-QoS-level cgroup values, the kernel switches group
identity and core scheduling need (``kernel.sched_group_identity_enabled``,
``kernel.sched_core``), the normalized CFS quota of each normalized pod's cgroup
(``CPUNormalization``: koordlet scales the pod's as well as the containers'), and which resctrl
groups are koordlet's (``koordlet-``: those no live pod asks for are removed). Pure: no file is
read here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.annotations import AnnotationError
from policy_server.policies.koordinator_qos.authority import Refusal
from policy_server.policies.koordinator_qos.hooks import normalization
from policy_server.policies.koordinator_qos.hooks import oom as oom_hook
from policy_server.policies.koordinator_qos.hooks.group_identity import class_values
from policy_server.policies.koordinator_qos.nodeslo import CPUQOS
from policy_server.policies.koordinator_qos.qos import KubeQOS, QOSClass, kube_qos
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import PodTarget
from policy_server.sdk import (
    BVT_FILE,
    SYSCTL_GROUP_IDENTITY,
    CgroupWrite,
    CoreSchedGroup,
    Event,
    KernelSwitch,
    NodeNeeds,
    NodePlan,
    OomScore,
    systemd_parent_slice,
)

SYSCTL_SCHED_CORE = "sched_core"


@dataclass(frozen=True, slots=True)
class CoreSchedParam:
    """One class's core-sched parameters (koordlet's ``Param``)."""

    enabled: bool = False
    expeller: bool = False
    cpu_idle: bool = False


def _param(cpu_qos: CPUQOS, core_sched: bool) -> CoreSchedParam:
    return CoreSchedParam(
        enabled=core_sched and cpu_qos.enable,
        expeller=core_sched and cpu_qos.core_expeller,
        cpu_idle=core_sched and cpu_qos.sched_idle == 1,
    )


@dataclass(frozen=True, slots=True)
class CoreSchedRule:
    """koordlet's core-sched rule: a node switch plus parameters per QoS."""

    enabled: bool
    lsr: CoreSchedParam
    ls: CoreSchedParam
    be: CoreSchedParam

    def for_pod(self, target: PodTarget) -> CoreSchedParam:
        qos = target.qos
        if qos in (QOSClass.LSE, QOSClass.LSR):
            return self.lsr
        if qos is QOSClass.LS:
            return self.ls
        if qos is QOSClass.BE:
            return self.be
        # Unlabeled: the kube QoS table (Guaranteed takes LSR's only if LSR is enabled).
        if target.kube_qos is KubeQOS.GUARANTEED:
            return self.lsr if self.lsr.enabled else self.ls
        if target.kube_qos is KubeQOS.BURSTABLE:
            return self.ls
        return self.be


def core_sched_rule(rules: Rules) -> CoreSchedRule:
    slo = rules.node_slo
    core_sched = slo.cpu_policy == "coreSched"
    lsr, ls, be = (_param(c, core_sched) for c in (slo.lsr, slo.ls, slo.be))
    return CoreSchedRule(lsr.enabled or ls.enabled or be.enabled, lsr, ls, be)


def core_sched_group(target: PodTarget, rule: CoreSchedRule) -> str | None:
    """The pod's cookie group, ``""``-free; ``None`` = the pod gets the default cookie 0.

    Group id from the label ``koordinator.sh/core-sched-group-id``; policy ``exclusive`` makes
    it the pod UID, ``none`` disables the pod; an expeller class appends ``-expeller``.
    """
    if not rule.enabled:
        return None
    param = rule.for_pod(target)
    labels = target.pod.labels
    group = labels.get(keys.LABEL_CORE_SCHED_GROUP_ID, "")
    policy = labels.get(keys.LABEL_CORE_SCHED_POLICY, "")
    enabled = param.enabled
    if policy == keys.CORE_SCHED_POLICY_EXCLUSIVE:
        group = target.pod.uid
    elif policy == keys.CORE_SCHED_POLICY_NONE:
        enabled = False
    if param.expeller:
        group += keys.CORE_SCHED_EXPELLER_SUFFIX
    if not enabled:
        return None
    # All enabled pods without a group id share the group "" in koordlet; name it.
    return group or "(default)"


def manages_core_sched(target: PodTarget) -> bool:
    """SYSTEM pods are never touched (koordlet keeps them on the default cookie)."""
    return target.qos is not QOSClass.SYSTEM


def oom_score(
    target: PodTarget, container_name: str, rules: Rules, kubelet: int | None = None
) -> tuple[int | None, str | None, Refusal | None]:
    """(desired ``oom_score_adj`` or None, warning, refusal) for one container of the pod;
    ``kubelet`` is the value the container has (a value below it or below its kube QoS
    class's lowest is refused unless trusted, as at CreateContainer)."""
    try:
        value, refusal = oom_hook.decide(target, container_name, kubelet, rules)
    except AnnotationError as exc:
        return None, f"OOMScoreAdj: {exc}; skipped for {target.label}/{container_name}", None
    return value, None, refusal


def kernel_switches(rules: Rules) -> dict[str, int]:
    """sysctl name (under ``kernel.``) -> value, for the features the rules turn on.

    Group identity on: core scheduling off first (it conflicts with bvt -1), identity on.
    Core scheduling on: group identity off, core scheduling on. Files a kernel does not have
    are left alone by the caller.
    """
    slo = rules.node_slo
    gi_applies = slo.cpu_policy in ("", "groupIdentity")
    if rules.features.GroupIdentity and gi_applies and rules.group_identity_enabled:
        return {SYSCTL_SCHED_CORE: 0, SYSCTL_GROUP_IDENTITY: 1}
    if rules.features.CoreSched and core_sched_rule(rules).enabled:
        return {SYSCTL_GROUP_IDENTITY: 0, SYSCTL_SCHED_CORE: 1}
    return {}


CPU_IDLE_FILE = "cpu.idle"


def kube_qos_dir(cgroup_parent: str) -> str | None:
    """The kube-QoS cgroup a pod cgroup sits in (``/kubepods/burstable`` for
    ``/kubepods/burstable/pod<uid>``, ``kubepods-burstable.slice`` for
    ``kubepods-burstable-pod<uid>.slice``); None if there is no level above the pod."""
    parent = cgroup_parent.strip().rstrip("/")
    if "/" not in parent:  # a slice (systemd driver), or a single name with nothing above
        try:
            return systemd_parent_slice(parent)
        except ValueError:
            return None
    head, sep, _ = parent.rpartition("/")
    return head if sep and head else None


def kube_qos_writes(cgroup_parents: Iterable[str], rules: Rules) -> tuple[CgroupWrite, ...]:
    """koordlet's kube-QoS-level values for the kube-QoS cgroups these pods live in.

    Group identity (gate on): ``cpu.bvt_warp_ns`` = 0 on the Guaranteed level, the LS class
    value on the Burstable level, the BE class value on the BestEffort level. Core scheduling
    (gate on): ``cpu.idle`` = 1 where that level's class has ``schedIdle: 1``, else 0.
    """
    features = rules.features
    if not (features.GroupIdentity or features.CoreSched):
        return ()
    _lsr, ls, be = class_values(rules)
    bvt = {KubeQOS.GUARANTEED: 0, KubeQOS.BURSTABLE: ls, KubeQOS.BEST_EFFORT: be}
    core = core_sched_rule(rules)
    guaranteed = core.lsr if core.lsr.enabled else core.ls
    idle = {
        KubeQOS.GUARANTEED: guaranteed.cpu_idle,
        KubeQOS.BURSTABLE: core.ls.cpu_idle,
        KubeQOS.BEST_EFFORT: core.be.cpu_idle,
    }
    writes: list[CgroupWrite] = []
    seen: set[str] = set()
    for parent in cgroup_parents:
        qos_dir = kube_qos_dir(parent)
        if qos_dir is None or qos_dir in seen:
            continue
        seen.add(qos_dir)
        qos = kube_qos(parent)
        label = f"kube-QoS {qos.value}"
        if features.GroupIdentity:
            writes.append(CgroupWrite(qos_dir, BVT_FILE, bvt[qos], label))
        if features.CoreSched:
            writes.append(CgroupWrite(qos_dir, CPU_IDLE_FILE, int(idle[qos]), label))
    return tuple(writes)


def normalized_pod_quotas(pods: Mapping[str, PodTarget], event: Event, rules: Rules,
                          baselines: Mapping[str, int]) -> tuple[CgroupWrite, ...]:
    """``cpu.cfs_quota_us`` of each normalized pod's cgroup, scaled as its containers' are
    (whichever way they are: through NRI or beside the runtime)."""
    if not rules.features.CPUNormalization:
        return ()
    ids: dict[str, list[str]] = {}
    for container in event.containers:
        ids.setdefault(container.pod_sandbox_id, []).append(container.id)
    writes = []
    for pod_id, target in pods.items():
        parent = target.pod.cgroup_parent
        quota = normalization.pod_quota(target, ids.get(pod_id, []), baselines, rules)
        if parent and quota is not None:
            who = f"{target.pod.namespace}/{target.pod.name}"
            writes.append(CgroupWrite(parent, "cpu.cfs_quota_us", quota, who))
    return tuple(writes)


def plan_node(event: Event, rules: Rules, refusals: list[Refusal] | None = None,
         baselines: Mapping[str, int] | None = None) -> NodePlan:
    """The whole plan for the node reconciler's pass over ``event`` (a Synchronize of every
    known pod and container): kube-QoS values, OOM scores, core-scheduling groups, switches,
    normalized pod quotas (from ``baselines``, the containers' unscaled quotas).
    OOM scores pod metadata may not set are left out and appended to ``refusals``."""
    pods = {pod.id: PodTarget.of(pod, rules.trust) for pod in event.pods}
    parents = [t.pod.cgroup_parent for t in pods.values() if t.pod.cgroup_parent]
    oom: list[OomScore] = []
    if rules.features.OOMScoreAdj:
        for container in event.containers:
            target = pods.get(container.pod_sandbox_id)
            if target is None:
                continue
            value, _warning, refusal = oom_score(
                target, container.name, rules, container.oom_score_adj
            )
            if refusal is not None and refusals is not None:
                refusals.append(refusal)
            if value is not None:
                oom.append(OomScore(container.pod_sandbox_id, container.name, value))
    core: tuple[CoreSchedGroup, ...] | None = None
    if rules.features.CoreSched:
        # The classification decides the cookie groups: a refused class label is said here
        # (Synchronize's reconcile says it too, for the hooks it runs).
        if refusals is not None:
            refusals.extend(r for t in pods.values() for r in t.refusals)
        rule = core_sched_rule(rules)
        core = tuple(
            CoreSchedGroup(pod_id, core_sched_group(target, rule))
            for pod_id, target in pods.items()
            if manages_core_sched(target)
        )
    return NodePlan(
        cgroup_writes=kube_qos_writes(parents, rules)
        + normalized_pod_quotas(pods, event, rules, baselines or {}),
        oom_scores=tuple(oom),
        core_sched=core,
        kernel_switches=tuple(KernelSwitch(n, v) for n, v in kernel_switches(rules).items()),
        # Whatever the gates say: a group left by a pod that is gone goes (as in koordlet).
        resctrl_prefixes=(keys.RESCTRL_GROUP_PREFIX,),
    )


def needs(rules: Rules) -> NodeNeeds:
    """The node features these rules ask for (the start-up probe's warnings)."""
    features = rules.features
    return NodeNeeds(
        resctrl=features.Resctrl,
        core_sched=features.CoreSched,
        group_identity=features.GroupIdentity and rules.group_identity_enabled,
        container_group_identity=features.GroupIdentity and rules.group_identity_kernel_support,
    )
