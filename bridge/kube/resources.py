"""kubelet's resource rules: QoS class, cgroup parent, CPU/memory/OOM/hugepage values.

Owns: the arithmetic kubelet applies to a pod's requests and limits before it calls CRI, and
the constants it uses (docs/try.md tables them, with where each comes from). Written from
kubelet's documented behaviour (pkg/kubelet/qos, cm, kuberuntime), not from its code.
Must not: read manifests or build runtime messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from bridge.contract import quantity
from bridge.kube.model import Container, ContainerKind, Pod, ResourceList, amount
from bridge.kube.node import NodeSpec

# CPU shares (cgroup v1 cpu.shares; runtimes map them to cpu.weight on v2).
MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
MILLI_CPU_PER_CPU = 1000
# CFS bandwidth: kubelet's default --cpu-cfs-quota-period, and the smallest quota it sets.
QUOTA_PERIOD_US = 100_000
MIN_QUOTA_US = 1000
# OOM score adjustments by QoS class (pkg/kubelet/qos/policy).
GUARANTEED_OOM_SCORE_ADJ = -997
BEST_EFFORT_OOM_SCORE_ADJ = 1000
# Priority at or above which a pod is critical (scheduling.SystemCriticalPriority).
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
NODE_CRITICAL_CLASS = "system-node-critical"
# The QoS resources (only these decide the class; hugepages and extended resources do not).
QOS_RESOURCES = ("cpu", "memory")
# The node allocatable cgroup and the QoS cgroups under it.
KUBEPODS = "kubepods"
# cgroup v2 file kubelet writes for NoSwap (its default when the node runs without swap).
SWAP_MAX_FILE = "memory.swap.max"


class QosClass(Enum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


@dataclass(frozen=True, slots=True)
class CpuMemory:
    """The CRI LinuxContainerResources fields kubelet derives from CPU and memory."""

    cpu_shares: int
    cpu_quota: int  # 0 = no limit (the runtime leaves the quota unset)
    cpu_period: int
    memory_limit: int  # 0 = no limit


def qos_class(pod: Pod) -> QosClass:
    """Guaranteed, Burstable or BestEffort; init and sidecar containers count."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for c in pod.containers:
        for name in QOS_RESOURCES:
            req, lim = amount(c.requests, name), amount(c.limits, name)
            if req is not None and req > 0:
                requests[name] = requests.get(name, Fraction(0)) + req
            if lim is not None and lim > 0:
                limits[name] = limits.get(name, Fraction(0)) + lim
            else:
                guaranteed = False  # every container needs a CPU and a memory limit
    if not requests and not limits:
        return QosClass.BEST_EFFORT
    if guaranteed and all(limits.get(n) == q for n, q in requests.items()) \
            and set(limits) == set(QOS_RESOURCES):
        return QosClass.GUARANTEED
    return QosClass.BURSTABLE


def cgroup_parent(pod: Pod, node: NodeSpec) -> str:
    """The pod's cgroup as kubelet passes it in PodSandboxConfig.linux.cgroup_parent."""
    qos = qos_class(pod)
    parts = [KUBEPODS]
    if qos is not QosClass.GUARANTEED:
        parts.append(qos.value.lower())  # burstable, besteffort
    parts.append(f"pod{pod.uid}")
    if node.cgroup_driver == "systemd":
        # systemd: one slice name that spells its ancestry; '-' in a unit name means nesting,
        # so the pod UID's dashes become underscores.
        return "-".join(p.replace("-", "_") for p in parts) + ".slice"
    return "/" + "/".join(parts)


def milli_cpu_to_shares(milli_cpu: int) -> int:
    if milli_cpu == 0:
        return MIN_SHARES
    shares = milli_cpu * SHARES_PER_CPU // MILLI_CPU_PER_CPU
    return min(max(shares, MIN_SHARES), MAX_SHARES)


def milli_cpu_to_quota(milli_cpu: int, period_us: int = QUOTA_PERIOD_US) -> int:
    if milli_cpu == 0:
        return 0
    return max(milli_cpu * period_us // MILLI_CPU_PER_CPU, MIN_QUOTA_US)


def cpu_memory(requests: ResourceList, limits: ResourceList) -> CpuMemory:
    """Shares from the CPU request (the limit when no request), quota from the limit."""
    cpu_request, cpu_limit = amount(requests, "cpu"), amount(limits, "cpu")
    limit_milli = quantity.milli_value(cpu_limit) if cpu_limit is not None else 0
    if cpu_request is None and limit_milli:
        shares = milli_cpu_to_shares(limit_milli)
    else:
        shares = milli_cpu_to_shares(quantity.milli_value(cpu_request or Fraction(0)))
    memory = amount(limits, "memory")
    return CpuMemory(cpu_shares=shares, cpu_quota=milli_cpu_to_quota(limit_milli),
                     cpu_period=QUOTA_PERIOD_US,
                     memory_limit=quantity.value(memory) if memory is not None else 0)


def oom_score_adj(pod: Pod, container: Container, node: NodeSpec) -> int:
    critical = pod.static or pod.priority >= SYSTEM_CRITICAL_PRIORITY
    if critical and pod.priority_class == NODE_CRITICAL_CLASS:
        return GUARANTEED_OOM_SCORE_ADJ
    qos = qos_class(pod)
    if qos is QosClass.GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos is QosClass.BEST_EFFORT:
        return BEST_EFFORT_OOM_SCORE_ADJ
    score = _burstable_score(container, node)
    if container.kind is ContainerKind.SIDECAR and pod.regular_containers:
        # A sidecar must not be killed before the containers it serves: it gets the lowest
        # score among the regular containers when that is lower than its own.
        score = min(score, *(_burstable_score(c, node) for c in pod.regular_containers))
    return score


def _burstable_score(container: Container, node: NodeSpec) -> int:
    memory = amount(container.requests, "memory")
    request = quantity.value(memory) if memory is not None else 0
    score = 1000 - (1000 * request) // node.memory_bytes
    # Clamps: never as protected as Guaranteed (>= 3), never as exposed as BestEffort (<= 999).
    if score < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if score >= BEST_EFFORT_OOM_SCORE_ADJ:
        return BEST_EFFORT_OOM_SCORE_ADJ - 1
    return int(score)


def hugepage_limits(container: Container, node: NodeSpec) -> tuple[tuple[str, int], ...]:
    """(page size as the runtime names it, bytes) for every size the node has, then any
    other size the container asks for; 0 where the container asks for none."""
    sizes = {size: 0 for size in node.hugepage_sizes_bytes}
    for name, limit in container.limits:
        if name.startswith("hugepages-"):
            sizes[quantity.value(quantity.parse(name.removeprefix("hugepages-")))] = \
                quantity.value(limit)
    return tuple((page_size_name(size), limit) for size, limit in sorted(sizes.items()))


def page_size_name(size_bytes: int) -> str:
    """2097152 -> "2MB", 1073741824 -> "1GB" (the cgroup file names' spelling)."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale}{unit}"
    return f"{size_bytes}B"


def swap(memory_limit: int, node: NodeSpec) -> tuple[int, dict[str, str]]:
    """(memory_swap_limit_in_bytes, unified) for NoSwap: v1 caps memory+swap at the memory
    limit; v2 writes memory.swap.max = 0."""
    if node.cgroup_version == 1:
        return memory_limit, {}
    return 0, {SWAP_MAX_FILE: "0"}


def pod_totals(containers: Iterable[Container], limits: bool) -> ResourceList:
    """The pod's effective requests (or limits): the larger of what its running containers
    (regular + sidecars) need and what the largest init container step needs."""
    def of(c: Container) -> ResourceList:
        return c.limits if limits else c.requests

    regular: dict[str, Fraction] = {}
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for c in containers:
        if c.kind is ContainerKind.REGULAR:
            _add(regular, of(c))
        elif c.kind is ContainerKind.SIDECAR:
            _add(sidecars, of(c))
            _max(init_peak, tuple(sidecars.items()))
        else:
            step = dict(sidecars)
            _add(step, of(c))
            _max(init_peak, tuple(step.items()))
    total = dict(regular)
    _add(total, tuple(sidecars.items()))
    _max(total, tuple(init_peak.items()))
    return tuple(sorted(total.items()))


def _add(into: dict[str, Fraction], items: ResourceList) -> None:
    for name, q in items:
        into[name] = into.get(name, Fraction(0)) + q


def _max(into: dict[str, Fraction], items: ResourceList) -> None:
    for name, q in items:
        into[name] = max(into.get(name, Fraction(0)), q)
