"""How a runtime lays new ``LinuxResources`` over a container's current ones: the overlay rule.

Owns the combination of an applied change with what the container has, field by field, as the
runtime does it (not protobuf's ``MergeFrom``, which appends every repeated field):

- **set scalars replace** (``cpu.*``, ``memory.*``: an ``Optional*`` wrapper counts when present,
  ``cpu.cpus``/``cpu.mems`` when non-empty; ``pids``, ``blockio_class``, ``rdt_class`` whole).
  NRI's generator (``pkg/runtime-tools/generate/generate.go`` ``AdjustResources``, v0.8.0 to
  v0.12.2) calls one ``SetLinuxResources*`` per set field at CreateContainer; containerd's
  ``WithResources`` (``internal/cri/opts/spec_linux_opts.go``, used by UpdateContainerResources
  for an UpdateContainer reply and for an unsolicited update alike, after ``toCRIResources``)
  sets each non-zero field on the spec it already has.
- **``hugepage_limits``: one limit per page size, the later wins.** At creation
  ``AddLinuxResourcesHugepageLimit`` (opencontainers/runtime-tools ``generate.go``) replaces the
  entry of the same page size, else appends; on an update ``WithResources`` appends to the
  spec's list and runc writes the entries in order, so the last one per page size is in force.
  Limits of other page sizes stay.
- **``unified``: per key** (``AddLinuxResourcesUnified`` and ``WithResources`` both set
  ``Unified[k] = v`` on the existing map); other keys stay.
- **``devices`` (device cgroup rules) are appended**: ``AddLinuxResourcesDevice`` appends the
  rule to the spec's list (the kernel reads the rules in order, a later rule overriding an
  earlier one), it never replaces the list.

Which fields a runtime applies at all on each path (at creation NRI's generator applies only
``memory.limit`` of the memory fields, and sets swap to it; containerd's ``toCRIResources``
carries no ``pids``, classes or device rules on updates) is not this module's: it says how a
field that is applied combines. The bridge's state cache (bridge.nri.cache) folds its answers
with it. Must not do I/O or know which runtime is connected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from google.protobuf.message import Message

from bridge.proto.nri import api_pb2 as api


def _set_fields_replace(current: Message, change: Message) -> None:
    """Every field set in ``change`` replaces the same field of ``current`` (cpu, memory)."""
    for field, value in change.ListFields():
        if field.message_type is not None:
            getattr(current, field.name).CopyFrom(value)
        else:
            setattr(current, field.name, value)


def _replace(current: api.LinuxResources, change: api.LinuxResources, name: str) -> None:
    getattr(current, name).CopyFrom(getattr(change, name))


def _per_page_size(current: api.LinuxResources, change: api.LinuxResources, name: str) -> None:
    for limit in change.hugepage_limits:
        for existing in current.hugepage_limits:
            if existing.page_size == limit.page_size:
                existing.limit = limit.limit
                break
        else:
            current.hugepage_limits.add().CopyFrom(limit)


def _per_key(current: api.LinuxResources, change: api.LinuxResources, name: str) -> None:
    getattr(current, name).update(getattr(change, name))


def _append(current: api.LinuxResources, change: api.LinuxResources, name: str) -> None:
    getattr(current, name).extend(getattr(change, name))


_Rule = Callable[[api.LinuxResources, api.LinuxResources, str], None]

# Every LinuxResources field and its rule (tests/bridge/contract/test_resource_overlay.py checks
# that each field of the message is named here, so a new NRI field needs its rule written down).
RULES: Mapping[str, _Rule] = MappingProxyType({
    "memory": lambda cur, chg, name: _set_fields_replace(cur.memory, chg.memory),
    "cpu": lambda cur, chg, name: _set_fields_replace(cur.cpu, chg.cpu),
    "hugepage_limits": _per_page_size,
    "blockio_class": _replace,
    "rdt_class": _replace,
    "unified": _per_key,
    "devices": _append,
    "pids": _replace,
})


def overlay_resources(current: api.LinuxResources, change: api.LinuxResources) -> None:
    """Lay ``change`` over ``current`` in place, by each field's rule (module docstring)."""
    for field, _ in change.ListFields():
        RULES[field.name](current, change, field.name)
