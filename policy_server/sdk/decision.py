"""What a policy handler returns and how several handlers' outputs merge.

Owns the decision value types (frozen dataclasses) and the merge with conflict detection (two
handlers setting the same field: the later one in handler order wins and the conflict is
reported); ``policy_server.engine.reply`` turns a merged decision into the reply body. Must not
do I/O or import web frameworks; policies may import it (it sits below the engine).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policy_server.sdk.model import Mount, no_strings
from policy_server.sdk.oci import Device, Rlimit, StagedHook


@dataclass(frozen=True, slots=True)
class ResourcePatch:
    """The ``LinuxResources`` fields a decision sets; ``None`` / empty means "leave alone"."""

    cpu_shares: int | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    cpu_cpus: str | None = None
    cpu_mems: str | None = None
    memory_limit: int | None = None
    unified: Mapping[str, str] = field(default_factory=no_strings)
    rdt_class: str | None = None

    def is_empty(self) -> bool:
        return (
            self.cpu_shares is None
            and self.cpu_quota is None
            and self.cpu_period is None
            and self.cpu_cpus is None
            and self.cpu_mems is None
            and self.memory_limit is None
            and self.rdt_class is None
            and not self.unified
        )

    def to_json(self) -> dict[str, Any]:
        """The ``LinuxResources`` JSON object with only the set fields."""
        out: dict[str, Any] = {}
        cpu = {
            key: value
            for key, value in (
                ("shares", self.cpu_shares),
                ("quota", self.cpu_quota),
                ("period", self.cpu_period),
                ("cpus", self.cpu_cpus),
                ("mems", self.cpu_mems),
            )
            if value is not None
        }
        if cpu:
            out["cpu"] = cpu
        if self.memory_limit is not None:
            out["memory"] = {"limit": self.memory_limit}
        if self.unified:
            out["unified"] = dict(self.unified)
        if self.rdt_class is not None:
            out["rdt_class"] = self.rdt_class
        return out


_SCALAR_PATCH_FIELDS = (
    "cpu_shares",
    "cpu_quota",
    "cpu_period",
    "cpu_cpus",
    "cpu_mems",
    "memory_limit",
    "rdt_class",
)
# Field name -> JSON path inside LinuxResources, used in conflict reports. Each is a leaf of the
# one NRI field table (bridge.contract.field_table.LEAVES, under "linux.resources."; checked by
# tests/unit/test_field_table.py): what a runtime applies of it is that table's
# (bridge.contract.runtime_effects), the SDK's typed fields are being widened in issue 33 item 6.
_PATCH_PATHS = {
    "cpu_shares": "cpu.shares",
    "cpu_quota": "cpu.quota",
    "cpu_period": "cpu.period",
    "cpu_cpus": "cpu.cpus",
    "cpu_mems": "cpu.mems",
    "memory_limit": "memory.limit",
    "rdt_class": "rdt_class",
}


NO_RESOURCES = ResourcePatch()


@dataclass(frozen=True, slots=True)
class Adjustment:
    """A ``ContainerAdjustment`` (CreateContainer only), removals explicit."""

    env: Mapping[str, str] = field(default_factory=no_strings)
    annotations: Mapping[str, str] = field(default_factory=no_strings)
    mounts: tuple[Mount, ...] = ()
    resources: ResourcePatch = NO_RESOURCES
    oom_score_adj: int | None = None
    remove_env: tuple[str, ...] = ()
    remove_annotations: tuple[str, ...] = ()
    remove_mounts: tuple[str, ...] = ()
    # The privileged kinds (see policy_server.sdk.oci): the webhook must allow them.
    devices: tuple[Device, ...] = ()
    cdi_devices: tuple[str, ...] = ()
    hooks: tuple[StagedHook, ...] = ()
    rlimits: tuple[Rlimit, ...] = ()

    def is_empty(self) -> bool:
        return (
            not (self.env or self.annotations or self.mounts)
            and self.resources.is_empty()
            and self.oom_score_adj is None
            and not (self.remove_env or self.remove_annotations or self.remove_mounts)
            and not (self.devices or self.cdi_devices or self.hooks or self.rlimits)
        )


@dataclass(frozen=True, slots=True)
class ContainerUpdate:
    """A ``ContainerUpdate``: new resources for one existing container."""

    container_id: str
    resources: ResourcePatch
    ignore_failure: bool = False


@dataclass(frozen=True, slots=True)
class Eviction:
    """A ``ContainerEviction``."""

    container_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CgroupWrite:
    """A pod-level cgroup write NRI cannot carry (done by the optional side-effect executor).

    ``file`` is the cgroup v1 name (``cpu.shares``, ``cpu.cfs_quota_us``,
    ``memory.limit_in_bytes``, ``cpu.bvt_warp_ns``); the executor maps it for cgroup v2.
    """

    cgroup_parent: str
    file: str
    value: int
    pod: str = ""


@dataclass(frozen=True, slots=True)
class HostDirectory:
    """A host directory that must exist with ``mode`` (e.g. HAMi-core's per-container cache dir)."""

    path: str
    mode: int
    pod: str = ""


@dataclass(frozen=True, slots=True)
class ResctrlGroup:
    """A resctrl control group that must exist with these schemata (koordlet's per-pod group).

    The request, not the hardware mask: ``l3`` holds ``(cache id or None for every cache, start
    percent, end percent)`` and ``mb`` ``(cache id or None, percent)``; the executor turns them
    into L3 bit masks and MBA values with the node's cache geometry and CPU vendor.
    """

    name: str
    l3: tuple[tuple[int | None, int, int], ...] = ()
    mb: tuple[tuple[int | None, int], ...] = ()
    pod: str = ""


@dataclass(frozen=True, slots=True)
class ResctrlGroupRemoval:
    """A resctrl control group to delete (the pod is gone)."""

    name: str
    pod: str = ""


Effect = CgroupWrite | HostDirectory | ResctrlGroup | ResctrlGroupRemoval


@dataclass(frozen=True, slots=True)
class Decision:
    """One handler's (or the merged) answer to an event.

    ``errors`` are failures after which the handler still returns partial output (koordlet
    keeps what a failing hook already set); the engine applies the policy's failure policy to
    them. ``effects`` never reach the reply: they go to the side-effect executor. ``push`` never
    reaches the reply either: the server sends those updates through the bridge's
    ``POST /v1/updates`` after replying (for events whose reply cannot carry ``update``, such
    as RemoveContainer, the NRI way to change other containers then is UpdateContainers).
    """

    adjust: Adjustment | None = None
    update: tuple[ContainerUpdate, ...] = ()
    evict: tuple[Eviction, ...] = ()
    reject: str | None = None
    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    effects: tuple[Effect, ...] = ()
    push: tuple[ContainerUpdate, ...] = ()


NO_CHANGE = Decision()


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two handlers set the same field; ``second`` (later in order) won."""

    path: str
    first: str
    first_value: object
    second: str
    second_value: object

    def message(self) -> str:
        return (
            f"conflict on {self.path}: {self.first} set {self.first_value!r}, "
            f"{self.second} set {self.second_value!r}; {self.second} wins (later in order)"
        )


_REMOVED = "<removed>"


class _Merger:
    """Accumulates decisions in order, remembering which handler set each field."""

    def __init__(self) -> None:
        self.owners: dict[str, tuple[str, object]] = {}
        self.conflicts: list[Conflict] = []

    def claim(self, path: str, handler: str, value: object) -> None:
        previous = self.owners.get(path)
        if previous is not None:
            self.conflicts.append(Conflict(path, previous[0], previous[1], handler, value))
        self.owners[path] = (handler, value)

    def patch(self, acc: dict[str, Any], patch: ResourcePatch, prefix: str, handler: str) -> None:
        if patch.is_empty():
            return
        values = (
            patch.cpu_shares,
            patch.cpu_quota,
            patch.cpu_period,
            patch.cpu_cpus,
            patch.cpu_mems,
            patch.memory_limit,
            patch.rdt_class,
        )
        for name, value in zip(_SCALAR_PATCH_FIELDS, values, strict=True):
            if value is not None:
                self.claim(f"{prefix}.{_PATCH_PATHS[name]}", handler, value)
                acc[name] = value
        for key, value in patch.unified.items():
            self.claim(f"{prefix}.unified.{key}", handler, value)
            acc.setdefault("unified", {})[key] = value


def _build_patch(acc: Mapping[str, Any]) -> ResourcePatch:
    return ResourcePatch(**acc)


@dataclass(slots=True)
class _AdjustAcc:
    env: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    mounts: dict[str, Mount | None] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    oom_score_adj: int | None = None
    touched: bool = False
    # Keyed like NRI's ownership: device path, CDI name, rlimit type; hooks only append.
    devices: dict[str, Device] = field(default_factory=dict)
    cdi_devices: dict[str, None] = field(default_factory=dict)
    rlimits: dict[str, Rlimit] = field(default_factory=dict)
    hooks: list[StagedHook] = field(default_factory=list)

    def build(self) -> Adjustment:
        return Adjustment(
            env={k: v for k, v in self.env.items() if v is not None},
            annotations={k: v for k, v in self.annotations.items() if v is not None},
            mounts=tuple(m for m in self.mounts.values() if m is not None),
            resources=_build_patch(self.resources),
            oom_score_adj=self.oom_score_adj,
            remove_env=tuple(k for k, v in self.env.items() if v is None),
            remove_annotations=tuple(k for k, v in self.annotations.items() if v is None),
            remove_mounts=tuple(k for k, v in self.mounts.items() if v is None),
            devices=tuple(self.devices.values()),
            cdi_devices=tuple(self.cdi_devices),
            hooks=tuple(self.hooks),
            rlimits=tuple(self.rlimits.values()),
        )


def _merge_adjust(m: _Merger, acc: _AdjustAcc, adj: Adjustment, handler: str) -> None:
    acc.touched = True
    for key, value in adj.env.items():
        m.claim(f"adjust.env.{key}", handler, value)
        acc.env[key] = value
    for key in adj.remove_env:
        m.claim(f"adjust.env.{key}", handler, _REMOVED)
        acc.env[key] = None
    for key, value in adj.annotations.items():
        m.claim(f"adjust.annotations.{key}", handler, value)
        acc.annotations[key] = value
    for key in adj.remove_annotations:
        m.claim(f"adjust.annotations.{key}", handler, _REMOVED)
        acc.annotations[key] = None
    for mount in adj.mounts:
        m.claim(f"adjust.mounts[{mount.destination}]", handler, mount.source)
        acc.mounts[mount.destination] = mount
    for dest in adj.remove_mounts:
        m.claim(f"adjust.mounts[{dest}]", handler, _REMOVED)
        acc.mounts[dest] = None
    m.patch(acc.resources, adj.resources, "adjust.linux.resources", handler)
    if adj.oom_score_adj is not None:
        m.claim("adjust.linux.oom_score_adj", handler, adj.oom_score_adj)
        acc.oom_score_adj = adj.oom_score_adj
    for dev in adj.devices:
        m.claim(f"adjust.linux.devices[{dev.path}]", handler, f"{dev.type} {dev.major}:{dev.minor}")
        acc.devices[dev.path] = dev
    for name in adj.cdi_devices:
        m.claim(f"adjust.CDI_devices[{name}]", handler, name)
        acc.cdi_devices[name] = None
    for rlimit in adj.rlimits:
        m.claim(f"adjust.rlimits[{rlimit.type}]", handler, (rlimit.soft, rlimit.hard))
        acc.rlimits[rlimit.type] = rlimit
    acc.hooks.extend(adj.hooks)


@dataclass(frozen=True, slots=True)
class Merged:
    """The merged decision plus every conflict met on the way (also listed in its warnings)."""

    decision: Decision
    conflicts: tuple[Conflict, ...]


def merge(outputs: Iterable[tuple[str, Decision]]) -> Merged:
    """Merge ``(handler name, decision)`` pairs in order; later handlers win conflicts."""
    outputs = list(outputs)
    if _single_writer(outputs):
        return _merge_disjoint(outputs)
    m = _Merger()
    adjust = _AdjustAcc()
    updates: dict[str, tuple[dict[str, Any], bool]] = {}
    pushes: dict[str, tuple[dict[str, Any], bool]] = {}
    evictions: dict[str, list[str]] = {}
    rejects: list[str] = []
    warnings: list[str] = []
    errors: list[str] = []
    effects: dict[tuple[str, str], Effect] = {}
    for handler, decision in outputs:
        if decision.adjust is not None:
            _merge_adjust(m, adjust, decision.adjust, handler)
        _merge_updates(m, updates, decision.update, "update", handler)
        _merge_updates(m, pushes, decision.push, "push", handler)
        for ev in decision.evict:
            evictions.setdefault(ev.container_id, [])
            if ev.reason:
                evictions[ev.container_id].append(ev.reason)
        if decision.reject is not None:
            rejects.append(f"{handler}: {decision.reject}" if handler else decision.reject)
        warnings.extend(decision.warnings)
        errors.extend(decision.errors)
        for eff in decision.effects:
            key = _effect_key(eff)
            if isinstance(eff, CgroupWrite):
                m.claim(f"effects[{eff.cgroup_parent}].{eff.file}", handler, eff.value)
            effects[key] = eff
    warnings.extend(c.message() for c in m.conflicts)
    decision = Decision(
        adjust=adjust.build() if adjust.touched else None,
        update=_built_updates(updates),
        evict=tuple(Eviction(cid, "; ".join(reasons)) for cid, reasons in evictions.items()),
        reject="; ".join(rejects) if rejects else None,
        warnings=tuple(warnings),
        errors=tuple(errors),
        effects=tuple(effects.values()),
        push=_built_updates(pushes),
    )
    return Merged(decision, tuple(m.conflicts))


def _merge_updates(
    m: _Merger,
    into: dict[str, tuple[dict[str, Any], bool]],
    updates: tuple[ContainerUpdate, ...],
    part: str,
    handler: str,
) -> None:
    for upd in updates:
        acc, ignore = into.get(upd.container_id, ({}, True))
        m.patch(acc, upd.resources, f"{part}[{upd.container_id}].linux.resources", handler)
        # A failure may be ignored only if every handler asking for this update agrees.
        into[upd.container_id] = (acc, ignore and upd.ignore_failure)


def _built_updates(
    accs: Mapping[str, tuple[dict[str, Any], bool]],
) -> tuple[ContainerUpdate, ...]:
    return tuple(
        ContainerUpdate(cid, _build_patch(acc), ignore) for cid, (acc, ignore) in accs.items()
    )


def _single_writer(outputs: list[tuple[str, Decision]]) -> bool:
    """True when at most one decision writes each part, so no field can conflict.

    The common case (one hook sets resources, others only warn) then skips the field-by-field
    merge and reuses the writers' values as they are.
    """
    adjusts = updates = effects = 0
    for _, d in outputs:
        adjusts += d.adjust is not None
        updates += bool(d.update)
        effects += bool(d.effects)
        if d.evict or d.push or len(d.update) > 1 or (len(d.effects) > 1 and _repeats(d.effects)):
            return False
    return adjusts <= 1 and updates <= 1 and effects <= 1


def _effect_key(effect: Effect) -> tuple[str, str]:
    if isinstance(effect, CgroupWrite):
        return (effect.cgroup_parent, effect.file)
    if isinstance(effect, HostDirectory):
        return (effect.path, "mkdir")
    if isinstance(effect, ResctrlGroup):
        return (effect.name, "resctrl")
    return (effect.name, "resctrl-remove")


def _repeats(effects: tuple[Effect, ...]) -> bool:
    return len({_effect_key(e) for e in effects}) != len(effects)


def _merge_disjoint(outputs: list[tuple[str, Decision]]) -> Merged:
    adjust: Adjustment | None = None
    update: tuple[ContainerUpdate, ...] = ()
    effects: tuple[Effect, ...] = ()
    rejects: list[str] = []
    warnings: list[str] = []
    errors: list[str] = []
    for handler, d in outputs:
        adjust = d.adjust if d.adjust is not None else adjust
        update = d.update or update
        effects = d.effects or effects
        if d.reject is not None:
            rejects.append(f"{handler}: {d.reject}" if handler else d.reject)
        warnings.extend(d.warnings)
        errors.extend(d.errors)
    decision = Decision(
        adjust=adjust,
        update=update,
        reject="; ".join(rejects) if rejects else None,
        warnings=tuple(warnings),
        errors=tuple(errors),
        effects=effects,
    )
    return Merged(decision, ())
