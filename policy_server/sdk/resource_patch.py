"""``ResourcePatch``: the ``LinuxResources`` a decision sets, every field of the contract typed.

Owns the patch value, its one table of fields (each scalar declared once with its JSON path
inside ``LinuxResources``; ``SCALAR_PATHS``, attribute -> path, is read off the declarations
and the reply JSON, the merge's conflict paths and the request's ``Resources`` all use it) and
its JSON both ways; a patch is built with the reply contract's JSON types and inside its limits
(``policy_server.sdk.limit_checks``) or raises ``ValueError``, and read from JSON strictly.
``unified`` and ``hugepage_limits`` are owned per key (per page size), ``device_rules`` are
appended, as NRI does. Must not do I/O or merge several handlers' patches
(``policy_server.sdk.decision_merge``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from policy_server.sdk.limit_checks import Pairs, checks, read_object, read_objects
from policy_server.sdk.oci import DeviceRule, no_strings

_NO_PAGES: Mapping[str, int] = MappingProxyType({})


def _at(*path: str) -> Any:
    """A scalar field of the patch, unset by default, found at ``path`` in ``LinuxResources``."""
    return field(default=None, metadata={"path": path})


@dataclass(frozen=True, slots=True)
class ResourcePatch:
    """The ``LinuxResources`` fields a decision sets; ``None`` / empty means "leave alone".

    What a runtime applies of them, and on which path, is docs/webhooks.md's "Runtime
    capabilities" (at CreateContainer NRI applies only ``memory_limit`` of the memory fields).
    Every scalar is declared once, here, with its path (``SCALAR_PATHS`` is read off them)."""

    cpu_shares: int | None = _at("cpu", "shares")
    cpu_quota: int | None = _at("cpu", "quota")
    cpu_period: int | None = _at("cpu", "period")
    cpu_realtime_runtime: int | None = _at("cpu", "realtime_runtime")
    cpu_realtime_period: int | None = _at("cpu", "realtime_period")
    cpu_cpus: str | None = _at("cpu", "cpus")
    cpu_mems: str | None = _at("cpu", "mems")
    memory_limit: int | None = _at("memory", "limit")
    memory_reservation: int | None = _at("memory", "reservation")
    memory_swap: int | None = _at("memory", "swap")
    memory_kernel: int | None = _at("memory", "kernel")
    memory_kernel_tcp: int | None = _at("memory", "kernel_tcp")
    memory_swappiness: int | None = _at("memory", "swappiness")
    memory_disable_oom_killer: bool | None = _at("memory", "disable_oom_killer")
    memory_use_hierarchy: bool | None = _at("memory", "use_hierarchy")
    pids_limit: int | None = _at("pids", "limit")
    blockio_class: str | None = _at("blockio_class")
    rdt_class: str | None = _at("rdt_class")
    unified: Mapping[str, str] = field(default_factory=no_strings)
    # page size ("2MB", "1GB") -> limit in bytes
    hugepage_limits: Mapping[str, int] = field(default_factory=lambda: _NO_PAGES)
    # device cgroup rules, appended after the container's own
    device_rules: tuple[DeviceRule, ...] = ()

    def __post_init__(self) -> None:
        _check_patch(self)

    def scalars(self) -> dict[str, Any]:
        """The set scalar fields, by attribute name."""
        return {name: value for name in SCALAR_PATHS
                if (value := getattr(self, name)) is not None}

    def is_empty(self) -> bool:
        return (not (self.unified or self.hugepage_limits or self.device_rules)
                and not self.scalars())

    def to_json(self) -> dict[str, Any]:
        """The ``LinuxResources`` JSON object with only the set fields."""
        out: dict[str, Any] = {}
        for name, value in self.scalars().items():
            *parents, leaf = SCALAR_PATHS[name]
            node = out
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        if self.unified:
            out["unified"] = dict(self.unified)
        if self.hugepage_limits:
            out["hugepage_limits"] = [
                {"page_size": size, "limit": limit} for size, limit in self.hugepage_limits.items()
            ]
        if self.device_rules:
            out["devices"] = [rule.to_json() for rule in self.device_rules]
        return out

    @classmethod
    def from_json(cls, resources: Any, path: str = "adjust/linux/resources") -> ResourcePatch:
        """The patch for a ``LinuxResources`` JSON object at ``path`` of the reply (every field
        of it is typed; one outside the contract raises ``ValueError`` naming it)."""
        resources = read_object(resources, path)
        parents = {name: read_object(resources.get(name), f"{path}/{name}") for name in _PARENTS}
        values: dict[str, Any] = {}
        for name, at in SCALAR_PATHS.items():
            node = parents[at[0]].get(at[1]) if len(at) == 2 else resources.get(at[0])
            if node is not None:
                values[name] = node
        pages = read_objects(resources.get("hugepage_limits"), f"{path}/hugepage_limits")
        rules = read_objects(resources.get("devices"), f"{path}/devices")
        try:
            return cls(
                **values,
                unified=dict(read_object(resources.get("unified"), f"{path}/unified")),
                hugepage_limits={h.get("page_size", ""): h.get("limit", 0) for h in pages},
                device_rules=tuple(DeviceRule.from_json(rule) for rule in rules),
            )
        except ValueError as exc:  # the check names the adjustment's path: name this one
            if path == _RESOURCES[:-1]:
                raise
            raise ValueError(str(exc).replace(f"contract: {_RESOURCES}",
                                              f"contract: {path}/")) from None


# Every scalar of LinuxResources: patch attribute -> path inside LinuxResources.
SCALAR_PATHS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {f.name: f.metadata["path"] for f in fields(ResourcePatch) if "path" in f.metadata}
)

# The objects in LinuxResources holding scalars (cpu, memory, pids): no scalar is deeper.
_PARENTS = frozenset(path[0] for path in SCALAR_PATHS.values() if len(path) == 2)
assert all(len(path) <= 2 for path in SCALAR_PATHS.values())

# The contract's JSON types and limits of every field (read off the reply schema).
_RESOURCES = "adjust/linux/resources/"
_check_patch = checks(ResourcePatch, {
    **{name: _RESOURCES + "/".join(path) for name, path in SCALAR_PATHS.items()},
    "unified": _RESOURCES + "unified",
    "hugepage_limits": Pairs(_RESOURCES + "hugepage_limits", "page_size", "limit"),
})

NO_RESOURCES = ResourcePatch()
