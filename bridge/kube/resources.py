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

from bridge.contract import quantity, systemd_slice
from bridge.kube.node import NodeSpec
from bridge.kube.pod_spec import ContainerKind, ContainerSpec, PodSpec, ResourceList, amount

# CPU shares (cgroup v1 cpu.shares; on v2 the runtime turns them into cpu.weight with its own
# formula, docs/koordinator.md#cpuweight-on-cgroup-v2: `try` predicts shares, never weights).
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


def pod_qos_class(pod: PodSpec) -> QosClass:
    """Guaranteed, Burstable or BestEffort, from the pod-level resources when the pod has them,
    else from every container (init containers and sidecars count). Zero quantities are
    skipped, as if not given."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    if pod_level_set(pod):
        _add(requests, _positive(pod.pod_requests))
        _add(limits, _positive(pod.pod_limits))
        # Without pod-level limits the class is decided by requests alone (never Guaranteed
        # when there are any); with them, both CPU and memory limits are needed.
        guaranteed = not pod.pod_limits or set(limits) == set(QOS_RESOURCES)
    else:
        for c in pod.containers:
            _add(requests, _positive(c.requests))
            container_limits = _positive(c.limits)
            _add(limits, container_limits)
            # every container needs a CPU and a memory limit
            guaranteed = guaranteed and {n for n, _ in container_limits} == set(QOS_RESOURCES)
    if not requests and not limits:
        return QosClass.BEST_EFFORT
    # Guaranteed: requests equal limits resource by resource, and a request for each limit:
    # an explicit zero request (skipped above) with a limit makes the pod Burstable.
    if guaranteed and requests == limits:
        return QosClass.GUARANTEED
    return QosClass.BURSTABLE


def _positive(resources: ResourceList) -> ResourceList:
    """The QoS resources with a positive quantity (kubelet skips zeros and the rest)."""
    return tuple((n, q) for n, q in resources if n in QOS_RESOURCES and q > 0)


def pod_level_set(pod: PodSpec) -> bool:
    """Whether the pod has pod-level resources (`spec.resources`) for CPU or memory."""
    return bool(pod.pod_requests or pod.pod_limits)


def cgroup_parent(pod: PodSpec, node: NodeSpec) -> str:
    """The pod's cgroup as kubelet passes it in PodSandboxConfig.linux.cgroup_parent: the
    cgroup manager's full name for it, with either driver and either cgroup version."""
    qos = pod_qos_class(pod)
    parts = [KUBEPODS]
    if qos is not QosClass.GUARANTEED:
        parts.append(qos.value.lower())  # burstable, besteffort
    parts.append(f"pod{pod.uid}")
    if node.cgroup_driver == "systemd":
        # systemd (CgroupName.ToSystemd): every level is a slice whose name spells its whole
        # ancestry (bridge.contract.systemd_slice), the pod UID's '-' written '_':
        # /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice
        return "/" + systemd_slice.slice_path(systemd_slice.slice_name(parts))
    return "/" + "/".join(parts)


def kubelet_cpu_shares(milli_cpu: int) -> int:
    if milli_cpu == 0:
        return MIN_SHARES
    shares = milli_cpu * SHARES_PER_CPU // MILLI_CPU_PER_CPU
    return min(max(shares, MIN_SHARES), MAX_SHARES)


def kubelet_cpu_quota(milli_cpu: int, period_us: int = QUOTA_PERIOD_US) -> int:
    if milli_cpu == 0:
        return 0
    return max(milli_cpu * period_us // MILLI_CPU_PER_CPU, MIN_QUOTA_US)


def cpu_memory(requests: ResourceList, limits: ResourceList) -> CpuMemory:
    """Shares from the CPU request (the limit when no request), quota from the limit."""
    cpu_request, cpu_limit = amount(requests, "cpu"), amount(limits, "cpu")
    limit_milli = quantity.milli_value(cpu_limit) if cpu_limit is not None else 0
    if cpu_request is None and limit_milli:
        shares = kubelet_cpu_shares(limit_milli)
    else:
        shares = kubelet_cpu_shares(quantity.milli_value(cpu_request or Fraction(0)))
    memory = amount(limits, "memory")
    return CpuMemory(cpu_shares=shares, cpu_quota=kubelet_cpu_quota(limit_milli),
                     cpu_period=QUOTA_PERIOD_US,
                     memory_limit=quantity.value(memory) if memory is not None else 0)


def kubelet_oom_score_adj(pod: PodSpec, container: ContainerSpec, node: NodeSpec) -> int:
    critical = pod.static or pod.priority >= SYSTEM_CRITICAL_PRIORITY
    if critical and pod.priority_class == NODE_CRITICAL_CLASS:
        return GUARANTEED_OOM_SCORE_ADJ
    qos = pod_qos_class(pod)
    if qos is QosClass.GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos is QosClass.BEST_EFFORT:
        return BEST_EFFORT_OOM_SCORE_ADJ
    # With pod-level requests, the pod's memory request not given to any container is shared
    # out equally over all containers (init and sidecars too) and added to each one's own.
    share = _unassigned_memory_share(pod)
    score = _score(_memory_request(container) + share, node)
    if container.kind is ContainerKind.SIDECAR and pod.regular_containers:
        # A sidecar must not be killed before the containers it serves: its score is capped
        # at the score of the regular container with the smallest memory request
        # (kubelet's minRegularContainerMemory), unless that smallest request is 0.
        smallest = min(_memory_request(c) for c in pod.regular_containers)
        if smallest:
            score = min(score, _score(smallest + share, node))
    # Clamps: never as protected as Guaranteed (>= 3), never as exposed as BestEffort (<= 999).
    if score < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if score >= BEST_EFFORT_OOM_SCORE_ADJ:
        return BEST_EFFORT_OOM_SCORE_ADJ - 1
    return score


def _memory_request(container: ContainerSpec) -> int:
    memory = amount(container.requests, "memory")
    return quantity.value(memory) if memory is not None else 0


def _score(memory_request: int, node: NodeSpec) -> int:
    return 1000 - (1000 * memory_request) // node.memory_bytes


def _unassigned_memory_share(pod: PodSpec) -> int:
    memory = amount(pod.pod_requests, "memory")
    if not memory:
        return 0
    containers = amount(pod_totals(pod.containers, limits=False), "memory") or Fraction(0)
    unassigned = quantity.value(memory) - quantity.value(containers)
    share = abs(unassigned) // len(pod.containers)  # Go's integer division: toward zero
    return -share if unassigned < 0 else share


def hugepage_limits(container: ContainerSpec, node: NodeSpec) -> tuple[tuple[str, int], ...]:
    """(page size as the runtime names it, bytes) for every size the node has, then any
    other size the container asks for; 0 where the container asks for none."""
    sizes = {size: 0 for size in node.hugepage_sizes_bytes}
    for name, limit in container.limits:
        if name.startswith("hugepages-"):
            sizes[quantity.value(quantity.parse_quantity(name.removeprefix("hugepages-")))] = \
                quantity.value(limit)
    return tuple((page_size_name_from_bytes(size), limit) for size, limit in sorted(sizes.items()))


def page_size_name_from_bytes(size_bytes: int) -> str:
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


def pod_requests(pod: PodSpec) -> ResourceList:
    """The pod's requests as kubelet sends them for the sandbox: the containers' totals, with
    the pod-level requests (`spec.resources`) in place of the totals they give."""
    return _override(pod_totals(pod.containers, limits=False), pod.pod_requests)


def pod_limits(pod: PodSpec) -> ResourceList:
    """The pod's limits for the sandbox, likewise."""
    return _override(pod_totals(pod.containers, limits=True), pod.pod_limits)


def container_limits(pod: PodSpec, container: ContainerSpec) -> ResourceList:
    """The limits kubelet computes a container's CPU and memory values from: a container
    without its own CPU (memory) limit takes the pod-level one, when the pod has pod-level
    resources."""
    if not pod_level_set(pod):
        return container.limits
    inherited = tuple((n, q) for n, q in pod.pod_limits
                      if n in QOS_RESOURCES and not amount(container.limits, n))
    return _override(container.limits, inherited)


def _override(base: ResourceList, override: ResourceList) -> ResourceList:
    return tuple(sorted({**dict(base), **dict(override)}.items()))


def pod_totals(containers: Iterable[ContainerSpec], limits: bool) -> ResourceList:
    """The pod's effective requests (or limits): the larger of what its running containers
    (regular + sidecars) need and what the largest init container step needs."""
    def of(c: ContainerSpec) -> ResourceList:
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
