"""LinuxResources field tables and NRI's merge of resources.

`merge_resources`: one plugin's resources into the event's result, every set field claimed
through a callback (ownership, docs/protocol.md#ownership-and-conflicts), as the simulated
runtime's NRI merge does. How the runtime then lays the result over its container is not here:
that is the one overlay rule, bridge.contract.resource_overlay.overlay_resources, which the
bridge's state cache, the simulator and the test kit all use.

`Optional*` wrappers mean "set" by presence; `cpus`/`mems` by being non-empty
(docs/protocol.md#messages). The leaves and their NRI field ids come from the one table
(bridge.contract.field_table). Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bridge.contract.field_table import LEAVES, RESOURCES, leaves_under
from bridge.proto.nri import api_pb2 as api

Claim = Callable[[int, str | None], None]


def _leaves(sub: str) -> tuple[tuple[str, int], ...]:
    return tuple((leaf.name, leaf.field_id) for leaf in leaves_under(RESOURCES + sub))


# (name, NRI Field id) of each leaf, from the one table (bridge.contract.field_table).
MEMORY_FIELDS = _leaves("memory")
_CPU = _leaves("cpu")
CPU_STRING_FIELDS: tuple[tuple[str, int], ...] = tuple(
    (name, field) for name, field in _CPU if name in ("cpus", "mems"))
CPU_WRAPPED_FIELDS: tuple[tuple[str, int], ...] = tuple(
    (name, field) for name, field in _CPU if name not in ("cpus", "mems"))
HUGEPAGE_LIMITS = LEAVES[RESOURCES + "hugepage_limits"].field_id
CGROUPS_UNIFIED = LEAVES[RESOURCES + "unified"].field_id
PIDS_LIMIT = LEAVES[RESOURCES + "pids"].field_id
CLASS_FIELDS: tuple[tuple[str, int], ...] = tuple(
    (name, LEAVES[RESOURCES + name].field_id) for name in ("blockio_class", "rdt_class"))


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


def _put_hugepage(target: api.LinuxResources, limit: api.HugepageLimit) -> None:
    for existing in target.hugepage_limits:
        if existing.page_size == limit.page_size:
            existing.limit = limit.limit
            return
    target.hugepage_limits.add().CopyFrom(limit)


def is_empty(resources: api.LinuxResources) -> bool:
    return bool(resources.ByteSize() == 0)
