"""What a pod's metadata may grant: kubelet's decision is the floor of authority.

Owns the checks the hooks make before a label or annotation gives a container more than kubelet
gave it (docs/security.md#pod-metadata-is-input-not-authority, docs/koordinator.md#trust): an
``koordinator.sh/qosClass`` no stronger than the pod's kubelet QoS class allows (LSE/LSR only
Guaranteed, LS Guaranteed or Burstable, BE any, SYSTEM never); an exclusive cpuset only for a
Guaranteed container with whole CPUs as many as the cpuset holds; a per-pod resctrl group only
within its class's ``resctrlQOS``;
limits (CFS quota, memory) only lowered, never raised or removed; ``oom_score_adj`` never below
kubelet's; GPUs only those kubelet passed (env or CDI devices). A check that fails is a
``Refusal`` (the warning names the pod, the key and the rule) and is counted by ``Refusals``
(``policy_koordinator_qos_authority_refusals_total{policy, key, rule}``). The rules' ``trust``
lifts the checks for the keys and namespaces it names. Pure apart from the counts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.qos import KubeQOS, QOSClass
from policy_server.sdk import CounterSample, ResctrlGroup, Resources, parse_cpu_list

# The rules a refusal names (a bounded set: they are metric label values).
RULE_EXCLUSIVE_CPUSET = "exclusive-cpuset"
RULE_LIMIT_ABOVE_KUBELET = "limit-above-kubelet"
RULE_BATCH_POD_LEVEL = "batch-pod-level"
RULE_OOM_BELOW_KUBELET = "oom-below-kubelet"
RULE_DEVICE_NOT_ALLOCATED = "device-not-allocated"
RULE_GROUP_IDENTITY_ABOVE_CLASS = "group-identity-above-class"
RULE_QOS_CLASS_ABOVE_KUBELET = "qos-class-above-kubelet"
RULE_QOS_CLASS_SYSTEM = "qos-class-system"
RULE_RESCTRL_ABOVE_CLASS = "resctrl-above-class"
RULES = (
    RULE_EXCLUSIVE_CPUSET,
    RULE_LIMIT_ABOVE_KUBELET,
    RULE_BATCH_POD_LEVEL,
    RULE_OOM_BELOW_KUBELET,
    RULE_DEVICE_NOT_ALLOCATED,
    RULE_GROUP_IDENTITY_ABOVE_CLASS,
    RULE_QOS_CLASS_ABOVE_KUBELET,
    RULE_QOS_CLASS_SYSTEM,
    RULE_RESCTRL_ABOVE_CLASS,
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Something pod metadata asked for that kubelet's decision does not back."""

    hook: str
    pod: str  # namespace/name
    key: str  # the label or annotation
    rule: str  # one of RULES
    detail: str

    def message(self) -> str:
        return (
            f"{self.hook}: pod {self.pod}: {self.key} not honoured (rule {self.rule}): "
            f"{self.detail}; trust it in the rules' trust: if a scheduler writes it"
        )


_REFUSALS = (
    "authority_refusals",
    "Pod labels/annotations not honoured because kubelet's decision does not back what they "
    "ask for, by key and rule (docs/security.md#pod-metadata-is-input-not-authority)",
)


class Refusals:
    """Counts of refusals by (key, rule); exported through ``Policy.counters``."""

    def __init__(self, policy: str) -> None:
        self._policy = policy
        self._counts: Counter[tuple[str, str]] = Counter()

    def record(self, refusals: Iterable[Refusal]) -> None:
        for r in refusals:
            # Label values from bounded sets only: a key this policy reads, a rule name.
            key = r.key if r.key in keys.TRUSTED_KEYS else "(other)"
            self._counts[key, r.rule] += 1

    def counts(self) -> dict[str, int]:
        return {f"{k}/{rule}": n for (k, rule), n in sorted(self._counts.items())}

    def samples(self) -> Iterator[CounterSample]:
        for (key, rule), n in self._counts.items():
            labels = (("policy", self._policy), ("key", key), ("rule", rule))
            yield CounterSample(*_REFUSALS, labels, n)


def unlimited(value: int | None) -> bool:
    """Quota and memory limit: unset, zero and negative all mean no limit."""
    return value is None or value <= 0


def limit_allowed(kubelet: int | None, wanted: int) -> bool:
    """A limit may only be lowered: any value under no limit, else a positive one not above."""
    if unlimited(kubelet):
        return True
    assert kubelet is not None
    return wanted > 0 and wanted <= kubelet


def whole_cpus(resources: Resources | None) -> int | None:
    """The whole number of CPUs kubelet's CFS limit gives, ``None`` if not a whole number."""
    if resources is None:
        return None
    quota, period = resources.cpu.quota, resources.cpu.period or keys.CFS_BASE_PERIOD_US
    if quota is None or quota <= 0 or period <= 0 or quota % period:
        return None
    return quota // period


def exclusive_cpuset_refused(
    kube_qos: KubeQOS, kubelet: Resources | None, current: Resources | None, cpuset: str
) -> str | None:
    """Why an exclusive cpuset (with CFS quota -1) is not backed by kubelet, else ``None``.

    koordlet's LSE/LSR pods: Guaranteed, whole CPUs, as many as the cpuset holds. ``current``
    (reconcile) is what the container has now: a container already pinned so keeps it.
    """
    if kube_qos is not KubeQOS.GUARANTEED:
        return f"an exclusive cpuset needs a Guaranteed pod (kubelet made it {kube_qos.value})"
    size = len(parse_cpu_list(cpuset))
    cpus = whole_cpus(kubelet)
    if cpus is not None:
        if cpus == size:
            return None
        return f"cpuset {cpuset} has {size} CPUs, kubelet's limit is {cpus} CPUs"
    pinned = current is not None and unlimited(current.cpu.quota) and current.cpu.cpus
    if pinned and current is not None and current.cpu.cpus is not None:
        try:
            if parse_cpu_list(current.cpu.cpus) == parse_cpu_list(cpuset):
                return None  # already pinned so: nothing new is given
        except ValueError:
            pass
    return "kubelet's CPU limit is not a whole number of CPUs"


def kubelet_oom_floor(kube_qos: KubeQOS, kubelet: int | None) -> int:
    """The lowest ``oom_score_adj`` a pod's metadata may set: kubelet's own value for the
    container when the request carries it, and never below the class's lowest."""
    lowest = {
        KubeQOS.GUARANTEED: keys.KUBELET_OOM_GUARANTEED,
        KubeQOS.BURSTABLE: keys.KUBELET_OOM_BURSTABLE_MIN,
        KubeQOS.BEST_EFFORT: keys.KUBELET_OOM_BEST_EFFORT,
    }[kube_qos]
    return lowest if kubelet is None else max(lowest, kubelet)


# CDI names of GPUs: <vendor>/<class containing "gpu">=<minor>, gpu<minor> or gpu-<minor>.
_CDI_GPU = re.compile(r"^[^/=]+/[^=]*gpu[^=]*=(?:gpu-?)?(\d+)$", re.IGNORECASE)


def allocated_gpu_minors(env: Mapping[str, str], cdi_devices: Iterable[str]) -> frozenset[int]:
    """The GPUs kubelet passed the container: ``NVIDIA_VISIBLE_DEVICES`` minors in its env (the
    device plugin's), and CDI devices naming a GPU by number. ``all`` or UUIDs name no minor."""
    minors: set[int] = set()
    for part in env.get(keys.ENV_NVIDIA_VISIBLE_DEVICES, "").split(","):
        if part.strip().isdigit():
            minors.add(int(part.strip()))
    for name in cdi_devices:
        match = _CDI_GPU.match(name.strip())
        if match:
            minors.add(int(match.group(1)))
    return frozenset(minors)


# Koordinator classes from weakest to strongest, and the strongest a kube QoS class backs. LSE
# and LSR also need whole CPUs: what that backs (the exclusive cpuset) is checked per container
# by ``exclusive_cpuset_refused``; at the pod level (no resources in a PodSandbox) they give a
# Guaranteed pod nothing an unlabeled one lacks (docs/security.md, pod metadata section).
_STRENGTH = {QOSClass.BE: 0, QOSClass.LS: 1, QOSClass.LSR: 2, QOSClass.LSE: 3, QOSClass.SYSTEM: 4}
STRONGEST_CLASS = {
    KubeQOS.BEST_EFFORT: QOSClass.BE,
    KubeQOS.BURSTABLE: QOSClass.LS,
    KubeQOS.GUARANTEED: QOSClass.LSE,
}


def qos_class_refused(label: QOSClass, kube_qos: KubeQOS) -> tuple[str, str] | None:
    """(rule, why) if the pod's ``koordinator.sh/qosClass`` is stronger than kubelet's class
    backs, else ``None`` (no label, or one no stronger)."""
    if label is QOSClass.NONE:
        return None
    if label is QOSClass.SYSTEM:
        return RULE_QOS_CLASS_SYSTEM, "SYSTEM is granted only by the rules' trust"
    strongest = STRONGEST_CLASS[kube_qos]
    if _STRENGTH[label] <= _STRENGTH[strongest]:
        return None
    return RULE_QOS_CLASS_ABOVE_KUBELET, (
        f"{label.value} is stronger than a {kube_qos.value} pod may claim (at most "
        f"{strongest.value}); classified by its kube QoS class"
    )


@dataclass(frozen=True, slots=True)
class ResctrlBound:
    """A class's ``resctrlQOS`` as configured: the LLC range [start, end) percent and the MB
    percent its class group gets."""

    cat_start: int = 0
    cat_end: int = 100
    mba: int = 100


def resctrl_refused(group: ResctrlGroup, bound: ResctrlBound, class_key: str) -> str | None:
    """Why a per-pod resctrl group asks for more than its class's group gets, else ``None``:
    every LLC range inside [cat_start, cat_end], every MB percent at most ``mba``."""
    for cache, start, end in group.l3:
        if start < bound.cat_start or end > bound.cat_end:
            where = "llc.schemata" if cache is None else f"llc cache {cache}"
            return (
                f"{where} range [{start}, {end}] is outside {class_key}'s "
                f"[{bound.cat_start}, {bound.cat_end}]"
            )
    for cache, percent in group.mb:
        if percent > bound.mba:
            where = "mb.schemata" if cache is None else f"mb cache {cache}"
            return f"{where} percent {percent} is above {class_key}'s mbaPercent {bound.mba}"
    return None
