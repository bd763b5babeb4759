"""What a policy wants kept on the node between events: the reconcile hook's answer.

Owns the values a policy's reconcile hook (``Policy.reconcile``) returns, ``NodePlan`` and its
parts, and the kernel facts a policy and the node executor must agree on (the names of the
group identity cgroup file and kernel switch). The framework's node reconciler
(``policy_server.node.reconciler``) carries a plan out on every pass, drift counted per level;
the policy only says what should be.

Must not: do I/O, or know which policy asks (koordinator-qos is one user among any).
"""

from __future__ import annotations

from dataclasses import dataclass

from policy_server.sdk.effects import CgroupWrite

# Alibaba Cloud Linux / Anolis group identity: the cgroup file and the kernel switch
# (kernel.sched_group_identity_enabled) that turns the feature on.
BVT_FILE = "cpu.bvt_warp_ns"
SYSCTL_GROUP_IDENTITY = "sched_group_identity_enabled"


@dataclass(frozen=True, slots=True)
class OomScore:
    """Every process of container ``container`` of pod ``pod_id`` should have this
    ``oom_score_adj``."""

    pod_id: str
    container: str
    value: int


@dataclass(frozen=True, slots=True)
class CoreSchedGroup:
    """The core-scheduling cookie group of every process of pod ``pod_id`` (None: no cookie)."""

    pod_id: str
    group: str | None


@dataclass(frozen=True, slots=True)
class KernelSwitch:
    """``/proc/sys/kernel/<name>`` should hold ``value`` (left alone where the kernel lacks it)."""

    name: str
    value: int


@dataclass(frozen=True, slots=True)
class NodePlan:
    """Node state a policy keeps besides its decisions' effects, re-applied on every pass.

    ``cgroup_writes`` are values of cgroups above the pods (kube-QoS level); ``oom_scores`` and
    ``core_sched`` are matched with the running containers' processes (``core_sched`` None:
    this policy does not manage core scheduling; a pod without an entry is left alone).
    ``resctrl_prefixes`` name the resctrl groups the policy owns: a pass removes every group
    whose name starts with one of them and that no ``ResctrlGroup`` effect of the pass asks for
    (the groups of pods that are gone); groups named otherwise are never touched.
    """

    cgroup_writes: tuple[CgroupWrite, ...] = ()
    oom_scores: tuple[OomScore, ...] = ()
    core_sched: tuple[CoreSchedGroup, ...] | None = None
    kernel_switches: tuple[KernelSwitch, ...] = ()
    resctrl_prefixes: tuple[str, ...] = ()

    def merged(self, other: NodePlan) -> NodePlan:
        """Both plans (several policies' hooks); a later kernel switch value wins."""
        core: tuple[CoreSchedGroup, ...] | None = None
        if self.core_sched is not None or other.core_sched is not None:
            core = (*(self.core_sched or ()), *(other.core_sched or ()))
        return NodePlan(
            (*self.cgroup_writes, *other.cgroup_writes),
            (*self.oom_scores, *other.oom_scores),
            core,
            (*self.kernel_switches, *other.kernel_switches),
            (*self.resctrl_prefixes, *other.resctrl_prefixes),
        )


NO_PLAN = NodePlan()


@dataclass(frozen=True, slots=True)
class NodeNeeds:
    """Which node features a policy's configuration in force asks for: the start-up probe says
    at WARNING what such a feature cannot do here, and only at INFO otherwise."""

    resctrl: bool = False
    core_sched: bool = False
    group_identity: bool = False
    # Containers get unified[cpu.bvt_warp_ns] (the NRI mapping of group identity).
    container_group_identity: bool = False

    def __or__(self, other: NodeNeeds) -> NodeNeeds:
        return NodeNeeds(
            self.resctrl or other.resctrl,
            self.core_sched or other.core_sched,
            self.group_identity or other.group_identity,
            self.container_group_identity or other.container_group_identity,
        )


NO_NEEDS = NodeNeeds()
