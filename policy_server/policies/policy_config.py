"""The configuration of one built-in policy: the YAML file given with ``--policy NAME=FILE``.

Owns reading that file (YAML; JSON is YAML too) into ``PolicySettings`` and small typed
accessors whose errors name the file and the key (``hook-injector.yaml: hooks_dirs[1]: expected
a string``), so a policy's ``build`` reads its settings in a few lines and refuses unknown keys.
Must not know about any particular policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from policy_server.sdk import PolicyLoadError

_NO_DOC: Mapping[str, Any] = MappingProxyType({})


class PolicyConfigError(PolicyLoadError):
    """A built-in policy's configuration is invalid; the message names the file and key."""


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """What ``build`` gets: the policy's name, its configuration document and where it was read.

    ``doc`` is empty when no file was given: every built-in policy must run on its defaults.
    """

    name: str
    doc: Mapping[str, Any] = field(default_factory=lambda: _NO_DOC)
    source: str = "defaults"
    # Relative paths in the document are relative to the file's directory.
    base_dir: Path | None = None

    def error(self, key: str, message: str) -> PolicyConfigError:
        where = f"{key}: " if key else ""
        return PolicyConfigError(f"policy {self.name} ({self.source}): {where}{message}")

    def check_keys(self, known: frozenset[str]) -> None:
        unknown = sorted(set(self.doc) - known)
        if unknown:
            raise self.error(unknown[0], f"unknown key (known: {', '.join(sorted(known))})")

    def strings(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        """A list of strings (a single string is not accepted: say ``[x]``)."""
        value = self.doc.get(key)
        if value is None:
            return default
        if not isinstance(value, list):
            raise self.error(key, f"expected a list of strings, got {describe_value(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item:
                got = describe_value(item)
                raise self.error(f"{key}[{i}]", f"expected a non-empty string, got {got}")
            if "\0" in item:
                raise self.error(f"{key}[{i}]", "contains a NUL byte")
        return tuple(value)

    def string(self, key: str, default: str) -> str:
        value = self.doc.get(key, default)
        if not isinstance(value, str) or not value:
            raise self.error(key, f"expected a non-empty string, got {describe_value(value)}")
        return value

    def paths(self, key: str, default: tuple[str, ...] = ()) -> tuple[Path, ...]:
        """A list of paths; relative ones are taken relative to the configuration file."""
        out = []
        for i, text in enumerate(self.strings(key, default)):
            path = Path(text)
            if not path.is_absolute():
                if self.base_dir is None:
                    raise self.error(f"{key}[{i}]", f"expected an absolute path, got {text!r}")
                path = self.base_dir / path
            out.append(path)
        return tuple(out)

    def mapping(self, key: str) -> Mapping[str, Any]:
        value = self.doc.get(key)
        if value is None:
            return _NO_DOC
        if not isinstance(value, dict):
            raise self.error(key, f"expected a mapping, got {describe_value(value)}")
        return value


def describe_value(value: object) -> str:
    """How a YAML value is named in error messages (``the number 5``, ``a list``)."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}" if value else "an empty string"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def load_settings(name: str, path: Path | None) -> PolicySettings:
    """Read ``path`` (or nothing: the defaults); raises ``PolicyConfigError``."""
    if path is None:
        return PolicySettings(name)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyConfigError(
            f"policy {name}: cannot read {path}: {exc.strerror or exc}"
        ) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise PolicyConfigError(f"policy {name}: {path} is not valid YAML{where}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        got = describe_value(doc)
        raise PolicyConfigError(f"policy {name}: {path} must hold a mapping, not {got}")
    return PolicySettings(name, MappingProxyType(doc), str(path), path.parent.absolute())
