"""OCI values a container has and an adjustment can add besides env and resources.

Owns the frozen value types for mounts (also in every request's containers), devices
(``LinuxDevice``), device cgroup rules (``LinuxDeviceCgroup``), OCI hooks (``Hook`` per
lifecycle stage), POSIX rlimits and CDI device names, their reply JSON (the contract's proto
field names), and the shared empty string map. Devices, hooks, rlimits and CDI devices are the
privileged kinds of an adjustment: the bridge refuses them unless the webhook's ``allow`` list
names ``devices``, ``hooks``, ``rlimits`` or ``cdi_devices``. Hooks, devices, device rules and
rlimits are built with the reply contract's JSON types and inside its integer ranges or raise
``ValueError`` (``policy_server.sdk.limit_checks``); a mount is checked by ``check_mount``
when an ``Adjustment`` sends it. Must not do I/O or know about
particular policies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

from policy_server.sdk.limit_checks import checks

_EMPTY: Mapping[str, str] = MappingProxyType({})


def no_strings() -> Mapping[str, str]:
    """The shared empty string map (a default that costs no allocation)."""
    return _EMPTY


class Mount(NamedTuple):
    """An OCI mount (a named tuple: containers carry a dozen, built on every request)."""

    destination: str
    type: str = ""
    source: str = ""
    options: tuple[str, ...] = ()


class HookStage(StrEnum):
    """The lifecycle stages of ``Hooks`` (NRI field names; OCI spells them camelCase)."""

    PRESTART = "prestart"
    CREATE_RUNTIME = "create_runtime"
    CREATE_CONTAINER = "create_container"
    START_CONTAINER = "start_container"
    POSTSTART = "poststart"
    POSTSTOP = "poststop"


@dataclass(frozen=True, slots=True)
class Hook:
    """One OCI hook: run ``path`` with ``args`` (argv, including argv[0]) and ``env``."""

    path: str
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    timeout_s: int | None = None

    def __post_init__(self) -> None:
        _check_hook(self)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        if self.args:
            out["args"] = list(self.args)
        if self.env:
            out["env"] = list(self.env)
        if self.timeout_s is not None:
            out["timeout"] = self.timeout_s
        return out


@dataclass(frozen=True, slots=True)
class StagedHook:
    """A hook and the stage it runs in (hooks are append-only in NRI: no ownership)."""

    stage: HookStage
    hook: Hook

    def __post_init__(self) -> None:
        _check_staged(self)


@dataclass(frozen=True, slots=True)
class Device:
    """A ``LinuxDevice`` node to create in the container (``type`` is ``c``, ``b`` or ``p``)."""

    path: str
    type: str
    major: int
    minor: int
    file_mode: int | None = None
    uid: int | None = None
    gid: int | None = None

    def __post_init__(self) -> None:
        _check_device(self)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "type": self.type,
            "major": self.major,
            "minor": self.minor,
        }
        for key, value in (("file_mode", self.file_mode), ("uid", self.uid), ("gid", self.gid)):
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class Rlimit:
    """A ``POSIXRlimit``: ``type`` as OCI spells it (``RLIMIT_NOFILE``)."""

    type: str
    soft: int
    hard: int

    def __post_init__(self) -> None:
        _check_rlimit(self)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "soft": self.soft, "hard": self.hard}


@dataclass(frozen=True, slots=True)
class DeviceRule:
    """A ``LinuxDeviceCgroup`` rule: allow or deny ``access`` (``rwm``) to devices of ``type``
    (``c``, ``b``, ``a``) and ``major``:``minor`` (``None``: any)."""

    allow: bool
    access: str = "rwm"
    type: str = ""
    major: int | None = None
    minor: int | None = None

    def __post_init__(self) -> None:
        _check_rule(self)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"allow": self.allow}
        if self.access:
            out["access"] = self.access
        if self.type:
            out["type"] = self.type
        if self.major is not None:
            out["major"] = self.major
        if self.minor is not None:
            out["minor"] = self.minor
        return out

    @classmethod
    def from_json(cls, rule: Any) -> DeviceRule:
        return cls(rule.get("allow", False), rule.get("access", ""), rule.get("type", ""),
                   rule.get("major"), rule.get("minor"))


# The reply paths each type's fields go to (their JSON types and limits are the contract's).
_HOOK = "adjust/hooks/prestart/[]/"  # every stage's Hook is the same definition
_check_hook = checks(Hook, {"path": _HOOK + "path", "args": _HOOK + "args", "env": _HOOK + "env",
                            "timeout_s": _HOOK + "timeout"})
_check_staged = checks(StagedHook, {})
_check_device = checks(Device, {name: f"adjust/linux/devices/[]/{name}" for name in (
    "path", "type", "major", "minor", "file_mode", "uid", "gid")})
_check_rlimit = checks(Rlimit, {name: f"adjust/rlimits/[]/{name}"
                                for name in ("type", "soft", "hard")})
_check_rule = checks(DeviceRule, {name: f"adjust/linux/resources/devices/[]/{name}"
                                  for name in ("allow", "access", "type", "major", "minor")})
# A mount is checked by the Adjustment that sends it (requests carry a dozen per container).
check_mount = checks(Mount, {name: f"adjust/mounts/[]/{name}"
                             for name in ("destination", "type", "source", "options")})


def hooks_to_json(hooks: tuple[StagedHook, ...]) -> dict[str, Any]:
    """The adjustment's ``hooks`` object: stage -> hooks in the order given."""
    out: dict[str, list[dict[str, Any]]] = {}
    for staged in hooks:
        out.setdefault(staged.stage.value, []).append(staged.hook.to_json())
    return out
