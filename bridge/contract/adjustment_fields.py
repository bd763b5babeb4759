"""What each adjustable NRI field means to the bridge, defined once.

For every field of ContainerAdjustment, LinuxContainerAdjustment and LinuxResources (the parts
a policy may set in `adjust` and `update`): the allow-list kind an operator must grant, how
ownership is counted when several webhooks answer (docs/protocol.md#ownership-and-conflicts),
whether NRI's "-" marker can remove it (docs/protocol.md#removals), and the first NRI version whose
runtimes apply it (docs/protocol.md#messages, docs/protocol.md#what-each-nri-version-added: an older
runtime drops it silently). The allow list (bridge.webhooks.kinds), the merge
(bridge.webhooks.reply_merge), the removal syntax (bridge.contract.adjustment) and the runtime's
capabilities (bridge.contract.capabilities) read this table, the leaf table
(bridge.contract.field_table) expands it to leaves, and the reply walk
(bridge.webhooks.reply_walk) walks replies by it; a new adjustment field is
added here (after `make proto`). A field missing from the table is its own kind (refused until
someone allows it by name) with a single owner, so it is never silently unguarded.

Must not do I/O or know about webhooks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from bridge.contract.nri_version import Version

ALWAYS: Version = (0, 0, 0)  # in every NRI version a runtime ships (v0.3.0 onwards)


class Owner(Enum):
    SINGLE = "single"  # the whole field has one owner (cgroups_path, args, cpu.shares, ...)
    MAP = "map"  # one owner per map key (annotations, sysctl, unified, ...)
    ENTRY = "entry"  # one owner per list entry, named by the entry's `key` attribute
    APPEND = "append"  # append-only: never conflicts (hooks, cgroup device rules)
    NESTED = "nested"  # each set field of the sub-message has one owner (memory.limit, ...)
    WALKED = "walked"  # a sub-message with a table of its own (linux, linux.resources)


@dataclass(frozen=True, slots=True)
class FieldRule:
    kind: str  # the allow-list kind
    owner: Owner
    key: str = ""  # Owner.ENTRY: the attribute naming an entry
    removable: bool = False  # NRI's "-" marker removes an entry (webhook JSON: remove.<field>)
    since: Version = ALWAYS  # the first NRI version whose runtimes apply the field


_R = FieldRule
# Table order is the order of remove.<field> in messages and schemas.
ADJUSTMENT_FIELDS: Mapping[str, FieldRule] = MappingProxyType({
    "annotations": _R("annotations", Owner.MAP, removable=True),
    "mounts": _R("mounts", Owner.ENTRY, "destination", removable=True),
    "env": _R("env", Owner.ENTRY, "key", removable=True),
    "hooks": _R("hooks", Owner.APPEND),
    # rlimits first appear in NRI v0.4.0 (api.proto, generate.go AdjustRlimits); containerd
    # 1.7.0-1.7.6 (NRI v0.3.0) drops them.
    "rlimits": _R("rlimits", Owner.ENTRY, "type", since=(0, 4, 0)),
    "CDI_devices": _R("cdi_devices", Owner.ENTRY, "name", since=(0, 7, 0)),
    "args": _R("args", Owner.SINGLE, since=(0, 10, 0)),
    "linux": _R("", Owner.WALKED),
})
LINUX_FIELDS: Mapping[str, FieldRule] = MappingProxyType({
    "devices": _R("devices", Owner.ENTRY, "path", removable=True),
    "namespaces": _R("namespaces", Owner.ENTRY, "type", removable=True, since=(0, 10, 0)),
    "sysctl": _R("sysctl", Owner.MAP, removable=True, since=(0, 11, 0)),
    "net_devices": _R("net_devices", Owner.MAP, removable=True, since=(0, 11, 0)),
    "cgroups_path": _R("cgroups_path", Owner.SINGLE),
    "oom_score_adj": _R("oom_score_adj", Owner.SINGLE, since=(0, 7, 0)),
    "io_priority": _R("io_priority", Owner.SINGLE, since=(0, 10, 0)),
    "seccomp_policy": _R("seccomp", Owner.SINGLE, since=(0, 10, 0)),
    "scheduler": _R("scheduler", Owner.SINGLE, since=(0, 11, 0)),
    "rdt": _R("rdt", Owner.SINGLE, since=(0, 11, 0)),
    "memory_policy": _R("memory_policy", Owner.SINGLE, since=(0, 12, 0)),
    "resources": _R("", Owner.WALKED),
})
# LinuxResources, in adjustments and in updates. Cgroup device rules grant device access, so
# they need `devices`.
RESOURCE_FIELDS: Mapping[str, FieldRule] = MappingProxyType({
    "memory": _R("resources", Owner.NESTED),
    "cpu": _R("resources", Owner.NESTED),
    "pids": _R("resources", Owner.NESTED, since=(0, 7, 0)),
    "hugepage_limits": _R("resources", Owner.ENTRY, "page_size"),
    "unified": _R("resources", Owner.MAP),
    "blockio_class": _R("blockio_class", Owner.SINGLE),
    "rdt_class": _R("rdt_class", Owner.SINGLE),
    "devices": _R("devices", Owner.APPEND),
})

ALL_KINDS = frozenset(
    r.kind for table in (ADJUSTMENT_FIELDS, LINUX_FIELDS, RESOURCE_FIELDS) for r in table.values()
    if r.owner is not Owner.WALKED
)
# remove.<field> -> its rule, in table order.
REMOVABLE: Mapping[str, FieldRule] = MappingProxyType({
    name: rule for table in (ADJUSTMENT_FIELDS, LINUX_FIELDS) for name, rule in table.items()
    if rule.removable
})


# The sub-message each WALKED field opens, with its table.
SUBTABLES: Mapping[str, Mapping[str, FieldRule]] = MappingProxyType({
    "linux": LINUX_FIELDS, "resources": RESOURCE_FIELDS,
})


def _paths(table: Mapping[str, FieldRule], prefix: str) -> Iterator[tuple[str, FieldRule]]:
    for name, rule in table.items():
        yield prefix + name, rule
        if rule.owner is Owner.WALKED:
            yield from _paths(SUBTABLES[name], f"{prefix}{name}.")


_ALL_PATHS = tuple(_paths(ADJUSTMENT_FIELDS, ""))
# Every adjustable field by its path as in the webhook JSON (`linux.resources.pids`, `args`).
FIELD_PATHS: Mapping[str, FieldRule] = MappingProxyType({
    path: rule for path, rule in _ALL_PATHS if rule.owner is not Owner.WALKED
})
# The sub-messages that are walked into rather than set as a whole (`linux`, `linux.resources`).
WALKED_PATHS = frozenset(path for path, rule in _ALL_PATHS if rule.owner is Owner.WALKED)


def rule_of(table: Mapping[str, FieldRule], name: str) -> FieldRule:
    return table.get(name) or FieldRule(name, Owner.SINGLE)
