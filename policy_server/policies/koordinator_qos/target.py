"""What a koordinator hook sees and returns: targets, stages, results, the hook table entry.

Owns the hook interface shared by ``hooks/*`` and the bundle. A hook is a pure function of a
target and the rules; whole-hook failures raise ``PolicyError`` (nothing set), partial failures
come back in ``HookResult.errors`` next to what was already decided.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.authority import Refusal, qos_class_refused
from policy_server.policies.koordinator_qos.qos import KubeQOS, QOSClass, kube_qos, qos_class
from policy_server.policies.koordinator_qos.rules import Features, Rules, Trust
from policy_server.sdk import (
    NO_RESOURCES,
    UNKNOWN_NODE,
    Container,
    Effect,
    Mount,
    NodeFacts,
    Pod,
    ResourcePatch,
    Resources,
    no_strings,
)


class Stage(StrEnum):
    """Where a hook runs: koordlet's stages plus our reconcile (Synchronize / rule change)."""

    RUN_POD_SANDBOX = "RunPodSandbox"
    CREATE_CONTAINER = "CreateContainer"
    UPDATE_CONTAINER = "UpdateContainer"
    RECONCILE = "Reconcile"


@dataclass(frozen=True, slots=True)
class PodTarget:
    """A pod with its classification done once.

    ``qos`` is the ``koordinator.sh/qosClass`` label when kubelet's QoS class backs it (or the
    rules' ``trust`` names the label or the pod's namespace), else ``NONE``: the pod is
    classified by its kube QoS class, as an unlabeled one, and ``refusals`` says why.
    """

    pod: Pod
    qos: QOSClass
    kube_qos: KubeQOS
    refusals: tuple[Refusal, ...] = ()

    @classmethod
    def of(cls, pod: Pod, trust: Trust) -> PodTarget:
        label, kube = qos_class(pod.labels), kube_qos(pod.cgroup_parent)
        refused = qos_class_refused(label, kube)
        if refused is None or trust.trusts(keys.LABEL_QOS_CLASS, pod.namespace):
            return cls(pod, label, kube)
        rule, why = refused
        who = f"{pod.namespace}/{pod.name}"
        refusal = Refusal("qosClass", who, keys.LABEL_QOS_CLASS, rule, f"{label.value}: {why}")
        return cls(pod, QOSClass.NONE, kube, (refusal,))

    @property
    def label(self) -> str:
        return f"{self.pod.namespace}/{self.pod.name}"

    def trusted(self, key: str, rules: Rules) -> bool:
        """Whether the rules' ``trust`` lets ``key`` grant more than kubelet did on this pod."""
        return rules.trust.trusts(key, self.pod.namespace)


@dataclass(frozen=True, slots=True)
class Kubelet:
    """What kubelet gave the container, as the request says: the floor of authority.

    ``resources``: CreateContainer: the container's; UpdateContainer: the requested ones;
    reconcile: what it has now. ``current`` is what it has now (reconcile only). ``env`` and
    ``cdi_devices``: the devices the device plugin / DRA passed.
    """

    resources: Resources | None = None
    oom_score_adj: int | None = None
    env: Mapping[str, str] = field(default_factory=no_strings)
    cdi_devices: tuple[str, ...] = ()
    current: Resources | None = None

    @classmethod
    def of(
        cls, container: Container, resources: Resources | None, reconcile: bool = False
    ) -> Kubelet:
        return cls(
            resources,
            container.oom_score_adj,
            container.env_map(),
            container.cdi_devices,
            container.resources if reconcile else None,
        )


@dataclass(frozen=True, slots=True)
class ContainerTarget:
    """A container of ``pod`` on a node with ``node`` facts; ``quota`` is the CFS quota hooks
    start from.

    CreateContainer: the container's quota from the runtime; UpdateContainer: the requested
    quota; reconcile: the unscaled quota remembered from those events (``None`` if unknown).
    ``node`` says what the container's runtime accepts (no ``unified`` keys on cgroup v1, nor
    keys whose file the containers' cgroups lack); ``kubelet`` what kubelet gave it.
    """

    pod: PodTarget
    container_id: str
    name: str
    quota: int | None = None
    node: NodeFacts = UNKNOWN_NODE
    kubelet: Kubelet = Kubelet()


@dataclass(frozen=True, slots=True)
class HookResult:
    """A hook's output for one target."""

    resources: ResourcePatch = NO_RESOURCES
    env: Mapping[str, str] = field(default_factory=no_strings)
    mounts: tuple[Mount, ...] = ()
    oom_score_adj: int | None = None
    effects: tuple[Effect, ...] = ()
    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    refusals: tuple[Refusal, ...] = ()


PodHook = Callable[[PodTarget, Rules], HookResult | None]
ContainerHook = Callable[[ContainerTarget, Stage, Rules], HookResult | None]


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One row of the hook table: koordlet's hook name, its feature gate, where it runs."""

    name: str
    gate: Callable[[Features], bool]
    pod: PodHook | None = None
    container: ContainerHook | None = None
    container_stages: frozenset[Stage] = frozenset()
    remove_pod: PodHook | None = None
