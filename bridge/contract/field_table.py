"""The NRI field table at the leaf level: every field a reply can set, named once.

A *leaf* is what a runtime applies or ignores on its own: `linux.resources.memory.swappiness`
and `linux.resources.memory.limit` are two leaves (a runtime takes one and ignores the other),
where bridge.contract.adjustment_fields, which the allow list and the merge read, knows one
`linux.resources.memory` field with one owner per set sub-field. Every leaf row carries:

- `path`: its path in the webhook JSON (`linux.resources.memory.limit`, `args`, `linux.rdt`);
- `field`: the adjustment_fields entry it belongs to (the allow-list kind, ownership, removal);
- `field_id`: NRI's own `api.Field` number for it (ownership, `OwningPlugins`), 0 when NRI names
  none (cgroup device rules are appended without an owner; `linux.rdt` has three ids, RdtClosID,
  RdtSchemata, RdtEnableMonitoring, claimed one by one);
- `owner` and `removable`, from the field (a leaf of a nested sub-message has a single owner);
- `since`: the first NRI version whose message has the leaf (a runtime built on an older NRI
  cannot decode it and drops it silently, docs/protocol.md#what-each-nri-version-added);
- `in_update`: whether a ContainerUpdate can carry it (only `linux.resources.*`).

What each runtime does with each leaf on each path (applied, ignored, applied with a side
effect) is bridge.contract.runtime_effects, keyed by these paths. Consumers: runtime_effects,
bridge.runtime_facts.linux_resources (the resource leaves and their field ids), the docs'
capability table (tests/bridge/runtime_facts/test_field_table.py), and through runtime_effects the
capabilities, the dropped-field warning, the simulator and `try`/`test`.

Owns: the leaf list. Must not: say what a runtime does with a leaf, or do I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from bridge.contract.adjustment_fields import FIELD_PATHS, FieldRule, Owner
from bridge.contract.nri_version import Version
from bridge.proto.nri import api_pb2 as api

RESOURCES = "linux.resources."


@dataclass(frozen=True, slots=True)
class Leaf:
    """One leaf of ContainerAdjustment / ContainerUpdate."""

    path: str
    field: str
    field_id: int
    owner: Owner
    kind: str
    removable: bool
    since: Version
    in_update: bool

    @property
    def name(self) -> str:
        """The leaf's last path element (`swappiness`, `pids`, `sysctl`)."""
        return self.path.rsplit(".", 1)[-1]


# NRI's Field enum name per leaf path (api.proto's `Field`), "" where NRI has none.
_FIELD_IDS: Mapping[str, str] = MappingProxyType({
    "annotations": "Annotations", "mounts": "Mounts", "env": "Env", "hooks": "OciHooks",
    "rlimits": "Rlimits", "CDI_devices": "CdiDevices", "args": "Args",
    "linux.devices": "Devices", "linux.namespaces": "Namespace", "linux.sysctl": "Sysctl",
    "linux.net_devices": "LinuxNetDevices", "linux.cgroups_path": "CgroupsPath",
    "linux.oom_score_adj": "OomScoreAdj", "linux.io_priority": "IoPriority",
    "linux.seccomp_policy": "SeccompPolicy", "linux.scheduler": "LinuxSched", "linux.rdt": "",
    "linux.memory_policy": "MemoryPolicy",
    RESOURCES + "memory.limit": "MemLimit", RESOURCES + "memory.reservation": "MemReservation",
    RESOURCES + "memory.swap": "MemSwapLimit", RESOURCES + "memory.kernel": "MemKernelLimit",
    RESOURCES + "memory.kernel_tcp": "MemTCPLimit",
    RESOURCES + "memory.swappiness": "MemSwappiness",
    RESOURCES + "memory.disable_oom_killer": "MemDisableOomKiller",
    RESOURCES + "memory.use_hierarchy": "MemUseHierarchy",
    RESOURCES + "cpu.shares": "CPUShares", RESOURCES + "cpu.quota": "CPUQuota",
    RESOURCES + "cpu.period": "CPUPeriod", RESOURCES + "cpu.realtime_runtime": "CPURealtimeRuntime",
    RESOURCES + "cpu.realtime_period": "CPURealtimePeriod", RESOURCES + "cpu.cpus": "CPUSetCPUs",
    RESOURCES + "cpu.mems": "CPUSetMems", RESOURCES + "pids": "PidsLimit",
    RESOURCES + "hugepage_limits": "HugepageLimits", RESOURCES + "unified": "CgroupsUnified",
    RESOURCES + "blockio_class": "BlockioClass", RESOURCES + "rdt_class": "RdtClass",
    RESOURCES + "devices": "",
})
# The nested sub-messages whose set fields are leaves of their own (pids has one field, limit:
# the sub-message is the leaf).
_EXPANDED = MappingProxyType({
    RESOURCES + "memory": api.LinuxMemory.DESCRIPTOR,
    RESOURCES + "cpu": api.LinuxCPU.DESCRIPTOR,
})


def _leaves() -> Iterator[Leaf]:
    for path, rule in FIELD_PATHS.items():
        descriptor = _EXPANDED.get(path)
        names = [f"{path}.{fd.name}" for fd in descriptor.fields] if descriptor else [path]
        for name in names:
            yield _leaf(name, path, rule, Owner.SINGLE if descriptor else rule.owner)


def _leaf(path: str, field: str, rule: FieldRule, owner: Owner) -> Leaf:
    enum_name = _FIELD_IDS[path]  # a KeyError here: a new leaf needs its NRI Field id above
    return Leaf(path, field, int(api.Field.Value(enum_name)) if enum_name else 0, owner,
                rule.kind, rule.removable, rule.since, path.startswith(RESOURCES))


# Every leaf by path, in the order of the adjustment (annotations ... linux.resources.devices).
LEAVES: Mapping[str, Leaf] = MappingProxyType({leaf.path: leaf for leaf in _leaves()})
assert set(LEAVES) == set(_FIELD_IDS), "field ids for leaves that do not exist"
# The leaves a ContainerUpdate can carry, in the same order.
UPDATE_LEAVES: tuple[Leaf, ...] = tuple(leaf for leaf in LEAVES.values() if leaf.in_update)


def leaves_under(prefix: str) -> tuple[Leaf, ...]:
    """The leaves of the sub-message at `prefix` (`linux.resources.memory`), in proto order."""
    return tuple(leaf for path, leaf in LEAVES.items() if path.startswith(prefix + "."))


def leaf_paths(field: str, value: object) -> list[str]:
    """The leaf paths a set `field` (a FIELD_PATHS path) stands for, given its value: the set
    sub-fields of an expanded sub-message, else the field itself."""
    if field not in _EXPANDED:
        return [field]
    list_fields = getattr(value, "ListFields", None)
    if list_fields is None:
        return [field]
    return [f"{field}.{fd.name}" for fd, _ in list_fields()]
