"""CRI UpdateContainerResources as the bridge uses it: method paths and the NRI <-> CRI mapping.

On runtimes where a plugin-initiated NRI UpdateContainers can deadlock the runtime
(docs/protocol.md#unsolicited-updates-and-the-runtimes-locks), the bridge changes running
containers the way kubelet does: CRI UpdateContainerResources on the runtime's CRI socket. The
runtime then runs its own NRI UpdateContainer event (its own lock order) and applies the result.

Owns: the gRPC method paths (the bridge's client and the simulated runtime's server both use
them), which NRI LinuxResources leaves a CRI LinuxContainerResources can carry, and the
conversion both ways. Must not: do I/O or decide when the CRI route is taken (bridge.nri).

What a CRI update carries is what containerd's own UpdateContainers path applies anyway: it
turns a plugin's update into CRI resources (memory limit, swap, the CPU fields, hugepages,
unified) before applying it. Zero means "leave as it is" for every CRI scalar (containerd's
WithResources); so a limit without a swap makes the runtime set swap to the limit, as it does
for kubelet. What the runtime then keeps of it is the field table's `cri_update` route
(bridge.contract.runtime_effects), checked against real containerd by
tests/e2e/test_field_differential.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.proto.cri import runtime_pb2 as cri
from bridge.proto.nri import api_pb2 as api

SERVICE = "runtime.v1.RuntimeService"
# The calls the bridge makes and the simulated runtime serves: method -> (request type, response
# type); the gRPC path is f"/{SERVICE}/{method}".
METHODS: dict[str, tuple[type[Any], type[Any]]] = {
    "Version": (cri.VersionRequest, cri.VersionResponse),
    "UpdateContainerResources": (cri.UpdateContainerResourcesRequest,
                                 cri.UpdateContainerResourcesResponse),
}
CRI_API_VERSION = "v1"

INT64_MAX = (1 << 63) - 1

# NRI LinuxResources leaf (sub-message, field) -> CRI LinuxContainerResources scalar field.
SCALARS: tuple[tuple[str, str, str], ...] = (
    ("cpu", "shares", "cpu_shares"),
    ("cpu", "quota", "cpu_quota"),
    ("cpu", "period", "cpu_period"),
    ("memory", "limit", "memory_limit_in_bytes"),
    ("memory", "swap", "memory_swap_limit_in_bytes"),
)
STRINGS: tuple[tuple[str, str, str], ...] = (
    ("cpu", "cpus", "cpuset_cpus"),
    ("cpu", "mems", "cpuset_mems"),
)
# The CPU leaves copied from the container's current resources into every request, so the
# UpdateContainer event the runtime runs shows every plugin a whole CPU picture (as kubelet's
# calls do). Memory is sent only when the update sets it: re-sending an unchanged limit would
# make the runtime reset swap to it.
CARRIED_FROM_CURRENT = ("shares", "quota", "period", "cpus", "mems")
CARRIED: frozenset[str] = frozenset(
    {f"{m}.{f}" for m, f, _ in SCALARS} | {f"{m}.{f}" for m, f, _ in STRINGS}
    | {"hugepage_limits", "unified"})


class CriConversionError(ValueError):
    """An update value a CRI request cannot hold (an unsigned value above int64)."""


@dataclass(frozen=True, slots=True)
class CriUpdate:
    """One NRI ContainerUpdate as a CRI request, and the NRI leaves CRI cannot carry."""

    request: cri.UpdateContainerResourcesRequest
    dropped: tuple[str, ...]  # dotted NRI leaf names, e.g. "memory.swappiness", "pids"
    carried: api.ContainerUpdate  # the update without the dropped leaves (what gets applied)


def set_resource_leaves(resources: api.LinuxResources) -> list[str]:
    """Dotted names of the leaves set in `resources` ("cpu.shares", "pids", "unified")."""
    names: list[str] = []
    for field, value in resources.ListFields():
        if field.name in ("cpu", "memory"):
            names += (f"{field.name}.{leaf.name}" for leaf, _ in value.ListFields())
        else:
            names.append(field.name)
    return names


def to_cri(update: api.ContainerUpdate, current: api.LinuxResources | None = None) -> CriUpdate:
    """The CRI request for `update`, CPU leaves it does not set taken from `current`."""
    wanted = update.linux.resources
    dropped = tuple(name for name in set_resource_leaves(wanted) if name not in CARRIED)
    linux = cri.LinuxContainerResources()
    if current is not None:
        _copy_cpu(current, linux)
    for sub, leaf, target in SCALARS:
        message = getattr(wanted, sub)
        if message.HasField(leaf):
            value = getattr(message, leaf).value
            if value > INT64_MAX:
                raise CriConversionError(f"{sub}.{leaf} {value} is above int64")
            setattr(linux, target, value)
    for sub, leaf, target in STRINGS:
        text = getattr(getattr(wanted, sub), leaf)
        if text:
            setattr(linux, target, text)
    for limit in wanted.hugepage_limits:
        linux.hugepage_limits.add(page_size=limit.page_size, limit=limit.limit)
    linux.unified.update(wanted.unified)
    carried = api.ContainerUpdate()
    carried.CopyFrom(update)
    _clear_leaves(carried.linux.resources, dropped)
    request = cri.UpdateContainerResourcesRequest(container_id=update.container_id, linux=linux)
    return CriUpdate(request, dropped, carried)


def _copy_cpu(current: api.LinuxResources, linux: cri.LinuxContainerResources) -> None:
    cpu = current.cpu
    for sub, leaf, target in SCALARS:
        if sub == "cpu" and leaf in CARRIED_FROM_CURRENT and cpu.HasField(leaf):
            value = getattr(cpu, leaf).value
            if value <= INT64_MAX:
                setattr(linux, target, value)
    for sub, leaf, target in STRINGS:
        if sub == "cpu" and leaf in CARRIED_FROM_CURRENT and getattr(cpu, leaf):
            setattr(linux, target, getattr(cpu, leaf))


def _clear_leaves(resources: api.LinuxResources, names: tuple[str, ...]) -> None:
    for name in names:
        sub, _, leaf = name.partition(".")
        if leaf:
            getattr(resources, sub).ClearField(leaf)
        else:
            resources.ClearField(sub)
    for sub in ("cpu", "memory"):
        if resources.HasField(sub) and not getattr(resources, sub).ListFields():
            resources.ClearField(sub)


def to_nri(linux: cri.LinuxContainerResources) -> api.LinuxResources:
    """The NRI resources a runtime hands its plugins for a CRI update (zero: not set)."""
    resources = api.LinuxResources()
    for sub, leaf, source in SCALARS:
        value = getattr(linux, source)
        if value:
            getattr(getattr(resources, sub), leaf).value = max(value, 0) if leaf in (
                "shares", "period") else value
    for sub, leaf, source in STRINGS:
        if getattr(linux, source):
            setattr(getattr(resources, sub), leaf, getattr(linux, source))
    for limit in linux.hugepage_limits:
        resources.hugepage_limits.add(page_size=limit.page_size, limit=limit.limit)
    resources.unified.update(linux.unified)
    return resources
