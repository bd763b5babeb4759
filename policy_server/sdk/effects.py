"""Node effects: what a decision asks of the host besides the reply, and their registry.

Owns the effect value types a handler returns in ``Decision.effects`` (``CgroupWrite``,
``HostDirectory``, ``ResctrlGroup``, ``ResctrlGroupRemoval``) and ``EFFECTS``, the one table of
effect kinds: per type its key (two effects with one key are the same request: the merge keeps
the later, ``decision_merge``), whether two handlers asking for the same key with different
values is a conflict, and the note a reply carries when the kind was not applied
(``effect_notes``). How each kind is carried out on the host is the node layer's
(``policy_server.node.executor``, one executor per kind of this table, checked when the
executor is built). No policy's names live here: a group's name prefix or a directory's
clean-up is the policy's choice, carried in the values.

Must not: do I/O, or name a policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar


@dataclass(frozen=True, slots=True)
class CgroupWrite:
    """A pod-level cgroup write NRI cannot carry (done by the optional side-effect executor).

    ``file`` is the cgroup v1 name (``cpu.shares``, ``cpu.cfs_quota_us``,
    ``memory.limit_in_bytes``, ``cpu.bvt_warp_ns``, ``cpu.idle``); the executor maps it for
    cgroup v2. ``cgroup_parent`` is a pod's (or a level above the pods') cgroup as kubelet names
    it, with either cgroup driver.
    """

    cgroup_parent: str
    file: str
    value: int
    pod: str = ""


@dataclass(frozen=True, slots=True)
class HostDirectory:
    """A host directory that must exist with ``mode`` (e.g. HAMi-core's per-container cache dir).

    ``emptied``: whatever the directory holds is removed first, so it starts empty (a
    directory reused by a new container never shows it the previous one's files).
    """

    path: str
    mode: int
    pod: str = ""
    emptied: bool = False


@dataclass(frozen=True, slots=True)
class ResctrlGroup:
    """A resctrl control group that must exist with these schemata (e.g. koordlet's per-pod group).

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

E = TypeVar("E")


@dataclass(frozen=True, slots=True)
class EffectKind(Generic[E]):
    """One kind of effect: how to tell two requests apart, and what to say when not applied.

    ``key``: effects with equal keys ask for the same thing (the later one is kept).
    ``value``: for a kind whose key names one value (a cgroup file), the value two handlers may
    disagree on (a merge conflict); None when asking twice is never a conflict.
    ``notes``: the reply's warnings for these effects (all of this kind in one decision) when
    they were not applied, ``why`` saying why.
    """

    type: type[E]
    key: Callable[[E], tuple[str, str]]
    value: Callable[[E], object] | None = None
    notes: Callable[[Sequence[E], str], list[str]] | None = None


class EffectRegistry:
    """The effect kinds, in a fixed order (the order of their notes)."""

    def __init__(self, kinds: Iterable[EffectKind[Any]]) -> None:
        self.kinds: tuple[EffectKind[Any], ...] = tuple(kinds)
        self._by_type: dict[type, EffectKind[Any]] = {k.type: k for k in self.kinds}
        if len(self._by_type) != len(self.kinds):
            raise ValueError("an effect type is registered twice")

    def types(self) -> frozenset[type]:
        return frozenset(self._by_type)

    def kind(self, effect: object) -> EffectKind[Any]:
        """The kind of ``effect``; ``TypeError`` for a value that is no registered effect."""
        try:
            return self._by_type[type(effect)]
        except KeyError:
            raise TypeError(f"not a node effect: {type(effect).__name__}") from None

    def key(self, effect: object) -> tuple[str, str]:
        return self.kind(effect).key(effect)

    def notes(self, effects: Iterable[object], why: str) -> list[str]:
        """The warnings telling a caller that ``effects`` were not applied, ``why``."""
        grouped: dict[type, list[object]] = {}
        for effect in effects:
            grouped.setdefault(self.kind(effect).type, []).append(effect)
        out: list[str] = []
        for kind in self.kinds:
            of_kind = grouped.get(kind.type)
            if of_kind and kind.notes is not None:
                out.extend(kind.notes(of_kind, why))
        return out


def of_type(effects: Iterable[object], kind: type[E]) -> list[E]:
    """The effects of one kind, in order (``of_type(decision.effects, ResctrlGroup)``)."""
    return [e for e in effects if type(e) is kind]


def _directory_notes(directories: Sequence[HostDirectory], why: str) -> list[str]:
    return [
        f"host directory {d.path} not created ({why}); the mount that needs it will fail"
        for d in directories
    ]


# More pods than this and the writes are summed up in one note.
_WRITE_NOTES_MAX_PODS = 3


def _write_notes(writes: Sequence[CgroupWrite], why: str) -> list[str]:
    by_parent: dict[str, list[str]] = {}
    for w in writes:
        by_parent.setdefault(w.cgroup_parent, []).append(f"{w.file}={w.value}")
    if len(by_parent) > _WRITE_NOTES_MAX_PODS:
        return [f"{len(writes)} pod cgroup writes on {len(by_parent)} pods not applied ({why})"]
    return [
        f"pod cgroup writes not applied ({why}): {parent}: {', '.join(items)}"
        for parent, items in by_parent.items()
    ]


def _write_value(write: CgroupWrite) -> object:
    return write.value


EFFECTS = EffectRegistry(
    (
        EffectKind(HostDirectory, key=lambda d: (d.path, "mkdir"), notes=_directory_notes),
        EffectKind(
            CgroupWrite,
            key=lambda w: (w.cgroup_parent, w.file),
            value=_write_value,
            notes=_write_notes,
        ),
        EffectKind(ResctrlGroup, key=lambda g: (g.name, "resctrl")),
        EffectKind(ResctrlGroupRemoval, key=lambda r: (r.name, "resctrl-remove")),
    )
)


def effect_notes(effects: Iterable[object], why: str) -> list[str]:
    """``EFFECTS.notes``: the warnings saying ``effects`` were not applied, and why."""
    return EFFECTS.notes(effects, why)
