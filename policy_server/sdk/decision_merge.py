"""How several handlers' decisions merge into one, with conflict detection.

Owns the merge: handlers' decisions in handler order, field by field; two handlers setting the
same field (the same env var, annotation, mount destination, resource field, unified key,
hugepage size, sysctl, device, rlimit, a leaf of ``Adjustment.extra``, or the same container's
update field) is a conflict: the later one wins and the conflict is reported. Keyed kinds follow
NRI's ownership; hooks and device cgroup rules are only appended. Every merged value comes
from a value that was built inside the reply contract, so the merged decision is assembled from
them without checking them again (``decision.assembled``), once; one handler's decision that
needs no prefix is the merged one as it is. What joining adds may go past the contract's counts
(more than 100 warnings, a joined reason over 4096 characters): the reply encoder fits those,
once (``policy_server.engine.reply``). Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policy_server.sdk.decision import Adjustment, ContainerUpdate, Decision, Eviction, assembled
from policy_server.sdk.effects import EFFECTS, Effect
from policy_server.sdk.oci import Device, Mount, Rlimit, StagedHook
from policy_server.sdk.resource_patch import SCALAR_PATHS, ResourcePatch


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
        for name, value in patch.scalars().items():
            self.claim(f"{prefix}.{'.'.join(SCALAR_PATHS[name])}", handler, value)
            acc[name] = value
        for key, value in patch.unified.items():
            self.claim(f"{prefix}.unified.{key}", handler, value)
            acc.setdefault("unified", {})[key] = value
        for size, limit in patch.hugepage_limits.items():
            self.claim(f"{prefix}.hugepage_limits[{size}]", handler, limit)
            acc.setdefault("hugepage_limits", {})[size] = limit
        if patch.device_rules:  # appended, never owned (NRI)
            acc["device_rules"] = (*acc.get("device_rules", ()), *patch.device_rules)

    def extra(self, acc: dict[str, Any], extra: Mapping[str, Any], prefix: str,
              handler: str) -> None:
        """``Adjustment.extra`` key by key: objects merge, any other value is a leaf."""
        for key, value in extra.items():
            path = f"{prefix}.{key}"
            if isinstance(value, Mapping) and value:
                inner = acc.get(key)
                if not isinstance(inner, dict):
                    inner = acc[key] = {}
                self.extra(inner, value, path, handler)
            else:
                self.claim(path, handler, value)
                acc[key] = value


def _build_patch(acc: Mapping[str, Any]) -> ResourcePatch:
    return assembled(ResourcePatch, **acc)


@dataclass(slots=True)
class _AdjustAcc:
    env: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    mounts: dict[str, Mount | None] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    oom_score_adj: int | None = None
    touched: bool = False
    args: tuple[str, ...] | None = None
    sysctl: dict[str, str | None] = field(default_factory=dict)
    removed: dict[str, dict[str, None]] = field(default_factory=dict)  # devices, namespaces, ...
    extra: dict[str, Any] = field(default_factory=dict)
    # Keyed like NRI's ownership: device path, CDI name, rlimit type; hooks only append.
    devices: dict[str, Device] = field(default_factory=dict)
    cdi_devices: dict[str, None] = field(default_factory=dict)
    rlimits: dict[str, Rlimit] = field(default_factory=dict)
    hooks: list[StagedHook] = field(default_factory=list)

    def build(self) -> Adjustment:
        return assembled(
            Adjustment,
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
            args=self.args,
            sysctl={k: v for k, v in self.sysctl.items() if v is not None},
            remove_sysctl=tuple(k for k, v in self.sysctl.items() if v is None),
            remove_devices=tuple(self.removed.get("devices", ())),
            remove_namespaces=tuple(self.removed.get("namespaces", ())),
            remove_net_devices=tuple(self.removed.get("net_devices", ())),
            extra=self.extra,
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
    if adj.args is not None:
        m.claim("adjust.args", handler, adj.args)
        acc.args = adj.args
    for key, value in adj.sysctl.items():
        m.claim(f"adjust.linux.sysctl.{key}", handler, value)
        acc.sysctl[key] = value
    for key in adj.remove_sysctl:
        m.claim(f"adjust.linux.sysctl.{key}", handler, _REMOVED)
        acc.sysctl[key] = None
    for kind, names in (("devices", adj.remove_devices), ("namespaces", adj.remove_namespaces),
                        ("net_devices", adj.remove_net_devices)):
        for name in names:
            m.claim(f"adjust.remove.{kind}[{name}]", handler, _REMOVED)
            acc.removed.setdefault(kind, {})[name] = None
    m.extra(acc.extra, adj.extra, "adjust", handler)


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
            kind = EFFECTS.kind(eff)
            key = kind.key(eff)
            if kind.value is not None:
                m.claim(f"effects[{key[0]}].{key[1]}", handler, kind.value(eff))
            effects[key] = eff
    warnings.extend(c.message() for c in m.conflicts)
    decision = assembled(
        Decision,
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
        assembled(ContainerUpdate, container_id=cid, resources=_build_patch(acc),
                  ignore_failure=ignore)
        for cid, (acc, ignore) in accs.items()
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


def _repeats(effects: tuple[Effect, ...]) -> bool:
    return len({EFFECTS.key(e) for e in effects}) != len(effects)


def _merge_disjoint(outputs: list[tuple[str, Decision]]) -> Merged:
    if len(outputs) == 1 and outputs[0][1].reject is None:
        return Merged(outputs[0][1], ())  # nothing to join, no reason to prefix
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
    decision = assembled(
        Decision,
        adjust=adjust,
        update=update,
        reject="; ".join(rejects) if rejects else None,
        warnings=tuple(warnings),
        errors=tuple(errors),
        effects=effects,
    )
    return Merged(decision, ())
