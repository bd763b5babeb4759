"""LinuxResources field tables and the two ways resources combine.

- `merge_resources`: one plugin's resources into the event's result, every
  set field claimed through a callback (ownership, docs/protocol.md#ownership-and-conflicts);
- `overlay_resources`: the runtime applying a result to its container (set
  fields replace, unset fields leave the current value alone).

`Optional*` wrappers mean "set" by presence; `cpus`/`mems` by being non-empty
(docs/protocol.md#messages). Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bridge.proto.nri import api_pb2 as api

F = api.Field
Claim = Callable[[int, str | None], None]

MEMORY_FIELDS: tuple[tuple[str, int], ...] = (
    ("limit", F.MemLimit),
    ("reservation", F.MemReservation),
    ("swap", F.MemSwapLimit),
    ("kernel", F.MemKernelLimit),
    ("kernel_tcp", F.MemTCPLimit),
    ("swappiness", F.MemSwappiness),
    ("disable_oom_killer", F.MemDisableOomKiller),
    ("use_hierarchy", F.MemUseHierarchy),
)
CPU_WRAPPED_FIELDS: tuple[tuple[str, int], ...] = (
    ("shares", F.CPUShares),
    ("quota", F.CPUQuota),
    ("period", F.CPUPeriod),
    ("realtime_runtime", F.CPURealtimeRuntime),
    ("realtime_period", F.CPURealtimePeriod),
)
CPU_STRING_FIELDS: tuple[tuple[str, int], ...] = (
    ("cpus", F.CPUSetCPUs),
    ("mems", F.CPUSetMems),
)
HUGEPAGE_LIMITS = int(F.HugepageLimits)
CGROUPS_UNIFIED = int(F.CgroupsUnified)
PIDS_LIMIT = int(F.PidsLimit)
CLASS_FIELDS: tuple[tuple[str, int], ...] = (
    ("blockio_class", F.BlockioClass),
    ("rdt_class", F.RdtClass),
)


def _no_claim(field: int, key: str | None) -> None:
    return None


def merge_resources(
    src: api.LinuxResources,
    targets: Sequence[api.LinuxResources],
    claim: Claim = _no_claim,
    *,
    with_pids: bool = True,
    append_devices: bool = True,
) -> None:
    """Copy every field set in `src` into each target, claiming it first."""
    if src.HasField("memory"):
        for name, field in MEMORY_FIELDS:
            if src.memory.HasField(name):
                claim(field, None)
                for target in targets:
                    getattr(target.memory, name).CopyFrom(getattr(src.memory, name))
    if src.HasField("cpu"):
        for name, field in CPU_WRAPPED_FIELDS:
            if src.cpu.HasField(name):
                claim(field, None)
                for target in targets:
                    getattr(target.cpu, name).CopyFrom(getattr(src.cpu, name))
        for name, field in CPU_STRING_FIELDS:
            value = getattr(src.cpu, name)
            if value:
                claim(field, None)
                for target in targets:
                    setattr(target.cpu, name, value)
    for limit in src.hugepage_limits:
        claim(HUGEPAGE_LIMITS, limit.page_size)
        for target in targets:
            _put_hugepage(target, limit)
    for key, value in src.unified.items():
        claim(CGROUPS_UNIFIED, key)
        for target in targets:
            target.unified[key] = value
    for name, field in CLASS_FIELDS:
        if src.HasField(name):
            claim(field, None)
            for target in targets:
                getattr(target, name).CopyFrom(getattr(src, name))
    if with_pids and src.HasField("pids"):
        claim(PIDS_LIMIT, None)
        for target in targets:
            target.pids.CopyFrom(src.pids)
    if append_devices:
        # Device cgroup rules are appended without ownership
        # (docs/protocol.md#ownership-and-conflicts).
        for target in targets:
            target.devices.extend(src.devices)


def overlay_resources(current: api.LinuxResources, src: api.LinuxResources) -> None:
    """Apply `src` onto `current` as the runtime does when it updates a container."""
    merge_resources(src, (current,), append_devices=False)
    if src.devices:
        del current.devices[:]
        current.devices.extend(src.devices)


def _put_hugepage(target: api.LinuxResources, limit: api.HugepageLimit) -> None:
    for existing in target.hugepage_limits:
        if existing.page_size == limit.page_size:
            existing.limit = limit.limit
            return
    target.hugepage_limits.add().CopyFrom(limit)


def is_empty(resources: api.LinuxResources) -> bool:
    return bool(resources.ByteSize() == 0)
