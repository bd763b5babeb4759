"""The configuration of one built-in policy: the YAML file given with ``--policy NAME=FILE``.

Owns reading that file (YAML; JSON is YAML too) into ``PolicySettings``, and validating it
against the policy's pydantic model (``PolicySettings.parse``) with errors that name the file
and the key path (``hook-injector.yaml: hooks_dirs[1]: expected a non-empty string, got the
number 5``); the field types every policy shares (``Strings``, ``Paths``, ``NonEmptyString``,
``AnyMapping``) carry their own messages, so a policy's ``build`` declares its settings in a few
lines and unknown keys are refused naming the known ones. Must not know about any particular
policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo

from policy_server.sdk import UNKNOWN_NODE, NodeFacts, PolicyLoadError, yaml_problem

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
    # The file itself (None: defaults), for a policy that reads or watches it on its own.
    path: Path | None = None
    # What the server found out about the host at start-up (cgroup version, files).
    node: NodeFacts = UNKNOWN_NODE

    def error(self, key: str, message: str) -> PolicyConfigError:
        where = f"{key}: " if key else ""
        return PolicyConfigError(f"policy {self.name} ({self.source}): {where}{message}")

    def parse(self, model: type[M]) -> M:
        """The document validated by ``model`` (a ``PolicyConfig``); raises
        ``PolicyConfigError`` naming the key path of the first problem (an unknown key first)."""
        try:
            return model.model_validate(dict(self.doc), context={"base_dir": self.base_dir})
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
        unknown = sorted(
            (str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"), key=str
        )
        if unknown:
            known = ", ".join(sorted(model.model_fields))
            raise self.error(unknown[0], f"unknown key (known: {known})") from None
        first = errors[0]
        key = ""
        for part in first["loc"]:
            key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else str(part)
        raise self.error(key, str(first["msg"]).removeprefix("Value error, ")) from None


class PolicyConfig(BaseModel):
    """Base of a built-in policy's configuration model: unknown keys refused, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


M = TypeVar("M", bound=PolicyConfig)


def _string(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {describe_value(value)}")
    if "\0" in value:
        raise ValueError("contains a NUL byte")
    return value


def _list(value: object) -> object:
    if value is not None and not isinstance(value, list):
        raise ValueError(f"expected a list of strings, got {describe_value(value)}")
    return value


def _path(value: object, info: ValidationInfo) -> Path:
    text = _string(value)
    path = Path(text)
    if not path.is_absolute():
        base_dir = (info.context or {}).get("base_dir")
        if base_dir is None:
            raise ValueError(f"expected an absolute path, got {text!r}")
        path = base_dir / path
    return path


def mapping_value(value: object) -> object:
    """``value`` if it is a mapping (None: an empty one), else a ValueError saying what it is."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping, got {describe_value(value)}")
    return value


# Field types shared by the built-in policies' models. A list of strings takes no single string
# (say ``[x]``) and is None when absent or null (the policy's default); relative paths are
# relative to the configuration file; a null mapping is an empty one.
NonEmptyString = Annotated[str, BeforeValidator(_string)]
Strings = Annotated[tuple[NonEmptyString, ...] | None, BeforeValidator(_list)]
Paths = Annotated[
    tuple[Annotated[Path, BeforeValidator(_path)], ...] | None, BeforeValidator(_list)
]
AnyMapping = Annotated[dict[Any, Any], BeforeValidator(mapping_value)]


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


def load_settings(name: str, path: Path | None, node: NodeFacts = UNKNOWN_NODE) -> PolicySettings:
    """Read ``path`` (or nothing: the defaults); raises ``PolicyConfigError``."""
    if path is None:
        return PolicySettings(name, node=node)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyConfigError(
            f"policy {name}: cannot read {path}: {exc.strerror or exc}"
        ) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyConfigError(f"policy {name}: {path} is not valid YAML: "
                                f"{yaml_problem(exc)}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        got = describe_value(doc)
        raise PolicyConfigError(f"policy {name}: {path} must hold a mapping, not {got}")
    return PolicySettings(
        name, MappingProxyType(doc), str(path), path.parent.absolute(), path, node
    )
