"""OCI hook configuration files (the ``hooks.d`` format, version 1.0.0) and their ``when`` rules.

Owns parsing one hook file and deciding whether it applies to a container. The format is the
one CRI-O and Podman read from ``/usr/share/containers/oci/hooks.d`` (containers/common
``oci-hooks(5)``)::

    {"version": "1.0.0",
     "hook": {"path": "/usr/libexec/oci/hooks.d/log", "args": ["log", "--start"],
              "env": ["K=V"], "timeout": 5},
     "when": {"always": true, "annotations": {"KEY-REGEX": "VALUE-REGEX"},
              "commands": ["ARGV0-REGEX"], "hasBindMounts": true},
     "stages": ["prestart", "createRuntime", "createContainer", "startContainer",
                "poststart", "poststop"]}

``when`` needs at least one condition, and the hook applies only if *every* condition given
matches: ``always: true``; each annotation pattern pair matches some annotation (key and value,
unanchored regular expressions); some command pattern matches ``args[0]``; ``hasBindMounts: true``
and the container has bind mounts. ``always: false`` or ``hasBindMounts: false`` never match.
Must not do I/O (the directory scan is ``hook_injector``'s).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policy_server.sdk import Hook, HookStage

VERSION = "1.0.0"
# OCI spelling -> NRI's Hooks field.
STAGES: Mapping[str, HookStage] = {
    "prestart": HookStage.PRESTART,
    "createRuntime": HookStage.CREATE_RUNTIME,
    "createContainer": HookStage.CREATE_CONTAINER,
    "startContainer": HookStage.START_CONTAINER,
    "poststart": HookStage.POSTSTART,
    "poststop": HookStage.POSTSTOP,
}
_TOP = frozenset({"version", "hook", "when", "stages"})
_HOOK = frozenset({"path", "args", "env", "timeout"})
_WHEN = frozenset({"always", "annotations", "commands", "hasBindMounts"})


class HookFileError(ValueError):
    """A hook file that cannot be used; the message says which key and why."""


@dataclass(frozen=True, slots=True)
class When:
    """The conditions of one hook file (``None``: not given)."""

    always: bool | None = None
    annotations: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = ()
    commands: tuple[re.Pattern[str], ...] = ()
    has_bind_mounts: bool | None = None

    def matches(
        self, annotations: Mapping[str, str], command: str | None, has_bind_mounts: bool
    ) -> bool:
        if self.always is not None and not self.always:
            return False
        if self.has_bind_mounts is not None and not (self.has_bind_mounts and has_bind_mounts):
            return False
        for key_pattern, value_pattern in self.annotations:
            if not any(
                key_pattern.search(key) and value_pattern.search(value)
                for key, value in annotations.items()
            ):
                return False
        return not self.commands or (
            command is not None and any(p.search(command) for p in self.commands)
        )


@dataclass(frozen=True, slots=True)
class HookFile:
    """One parsed hook file: the hook, where it runs, and when."""

    name: str
    hook: Hook
    stages: tuple[HookStage, ...]
    when: When


def _obj(value: object, where: str, known: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise HookFileError(f"{where}: expected an object")
    unknown = sorted(set(value) - known)
    if unknown:
        raise HookFileError(f"{where}: unknown key {unknown[0]!r}")
    return value


def _strings(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise HookFileError(f"{where}: expected an array of strings")
    return tuple(value)


def _pattern(text: object, where: str) -> re.Pattern[str]:
    if not isinstance(text, str):
        raise HookFileError(f"{where}: expected a regular expression string")
    try:
        return re.compile(text)
    except re.error as exc:
        raise HookFileError(f"{where}: invalid regular expression {text!r}: {exc}") from None


def _flag(when: Mapping[str, Any], key: str) -> bool | None:
    value = when.get(key)
    if value is not None and not isinstance(value, bool):
        raise HookFileError(f"when.{key}: expected true or false")
    return value


def _hook(value: object) -> Hook:
    d = _obj(value, "hook", _HOOK)
    path = d.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        raise HookFileError("hook.path: expected an absolute path")
    timeout = d.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)
                                or timeout <= 0):  # fmt: skip
        raise HookFileError("hook.timeout: expected a positive number of seconds")
    env = _strings(d.get("env"), "hook.env")
    for item in env:
        if "=" not in item:
            raise HookFileError(f"hook.env: {item!r} is not KEY=VALUE")
    return Hook(path, _strings(d.get("args"), "hook.args"), env, timeout)


def _when(value: object) -> When:
    d = _obj(value, "when", _WHEN)
    raw_annotations = d.get("annotations") or {}
    if not isinstance(raw_annotations, dict):
        raise HookFileError("when.annotations: expected an object of regular expressions")
    when = When(
        always=_flag(d, "always"),
        annotations=tuple(
            (_pattern(k, f"when.annotations key {k!r}"), _pattern(v, f"when.annotations[{k!r}]"))
            for k, v in raw_annotations.items()
        ),
        commands=tuple(
            _pattern(c, f"when.commands[{i}]")
            for i, c in enumerate(_strings(d.get("commands"), "when.commands"))
        ),
        has_bind_mounts=_flag(d, "hasBindMounts"),
    )
    if when == When():
        raise HookFileError(
            "when: needs at least one of always, annotations, commands, hasBindMounts"
        )
    return when


def _stages(value: object) -> tuple[HookStage, ...]:
    names = _strings(value, "stages")
    if not names:
        raise HookFileError("stages: expected at least one stage")
    out = []
    for name in names:
        if name not in STAGES:
            raise HookFileError(f"stages: unknown stage {name!r} (known: {', '.join(STAGES)})")
        if STAGES[name] not in out:
            out.append(STAGES[name])
    return tuple(out)


def parse_hook_file(name: str, text: str) -> HookFile:
    """Parse one file's JSON text; raises ``HookFileError``."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise HookFileError(f"not JSON: {exc}") from None
    d = _obj(doc, "file", _TOP)
    if d.get("version") != VERSION:
        raise HookFileError(f"version: expected {VERSION!r}, got {d.get('version')!r}")
    return HookFile(name, _hook(d.get("hook")), _stages(d.get("stages")), _when(d.get("when")))
