"""The ``NodePolicy`` document: its shape, and reading it from files and directories.

Owns the YAML format of the ``cel`` policy (close to Kubernetes' ValidatingAdmissionPolicy and
MutatingAdmissionPolicy; docs/policies/cel.md has the field table), as pydantic models with
unknown keys refused, and ``read_documents(path)``: a file holds one or more YAML documents
(``---``), a directory every ``*.yaml``/``*.yml`` in it, in name order. Errors name the file,
the document's ``metadata.name`` (or its index) and the key path, and raise ``PolicyLoadError``.
Must not compile expressions (``compiler``) or evaluate them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from policy_server import EventName, PolicyLoadError

API_VERSION = "nri-webhook-bridge.io/v1alpha1"
KIND = "NodePolicy"
_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ValidationAction(StrEnum):
    DENY = "Deny"
    WARN = "Warn"
    AUDIT = "Audit"


class PatchType(StrEnum):
    APPLY_CONFIGURATION = "ApplyConfiguration"
    JSON_PATCH = "JSONPatch"


class NamedExpression(_Model):
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")  # a CEL identifier: variables.NAME
    expression: str = Field(min_length=1)


class MatchCondition(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", max_length=63)
    expression: str = Field(min_length=1)


class Validation(_Model):
    expression: str = Field(min_length=1)
    message: str | None = None
    message_expression: str | None = Field(None, alias="messageExpression")
    reason: str | None = None


class AuditAnnotation(_Model):
    key: str = Field(min_length=1)
    value_expression: str = Field(min_length=1, alias="valueExpression")


class Mutation(_Model):
    patch_type: PatchType = Field(PatchType.APPLY_CONFIGURATION, alias="patchType")
    expression: str = Field(min_length=1)


class Spec(_Model):
    events: tuple[EventName, ...] = Field(min_length=1)
    failure_policy: Literal["Fail", "Ignore"] = Field("Fail", alias="failurePolicy")
    match_conditions: tuple[MatchCondition, ...] = Field((), alias="matchConditions")
    variables: tuple[NamedExpression, ...] = ()
    params: dict[str, Any] | None = None
    params_file: str | None = Field(None, alias="paramsFile")
    validations: tuple[Validation, ...] = ()
    validation_actions: tuple[ValidationAction, ...] = Field(
        (ValidationAction.DENY,), alias="validationActions", min_length=1)
    audit_annotations: tuple[AuditAnnotation, ...] = Field((), alias="auditAnnotations")
    mutations: tuple[Mutation, ...] = ()


class Metadata(_Model):
    name: str = Field(pattern=_NAME_PATTERN, max_length=63)
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class NodePolicyDoc(_Model):
    api_version: Literal["nri-webhook-bridge.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["NodePolicy"]
    metadata: Metadata
    spec: Spec


@dataclass(frozen=True, slots=True)
class Source:
    """One document as read: the model, the file it came from (relative paths start there)."""

    doc: NodePolicyDoc
    file: Path

    @property
    def name(self) -> str:
        return self.doc.metadata.name


def _key_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _parse(raw: object, file: Path, index: int) -> NodePolicyDoc:
    where = f"{file}: document {index}"
    if not isinstance(raw, dict):
        got = type(raw).__name__
        raise PolicyLoadError(f"{where}: expected a mapping (a NodePolicy), got {got}")
    metadata = raw.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if isinstance(name, str):
        where = f"{file}: NodePolicy {name}"
    try:
        return NodePolicyDoc.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        key = _key_path(first["loc"])
        if first["type"] == "extra_forbidden":
            raise PolicyLoadError(f"{where}: {key}: unknown key") from None
        raise PolicyLoadError(f"{where}: {key}: {first['msg']}") from None


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        if not found:
            raise PolicyLoadError(f"{path}: no *.yaml files in the directory")
        return found
    return [path]


def read_documents(path: Path) -> tuple[Source, ...]:
    """Every NodePolicy under ``path`` (a file or a directory); names must be unique."""
    out: list[Source] = []
    for file in _files(path):
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise PolicyLoadError(f"{file}: cannot read: {exc.strerror or exc}") from None
        try:
            raws = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            raise PolicyLoadError(f"{file}: not valid YAML{at}") from None
        out += [Source(_parse(raw, file, i), file) for i, raw in enumerate(raws)]
    if not out:
        raise PolicyLoadError(f"{path}: no NodePolicy documents")
    names = [s.name for s in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PolicyLoadError(f"{path}: NodePolicy {twice[0]} is defined twice")
    return tuple(out)


def read_params(source: Source) -> tuple[Any, Path | None]:
    """``spec.params``, or the YAML of ``spec.paramsFile`` (relative to the policy's file)."""
    spec = source.doc.spec
    if spec.params is not None and spec.params_file is not None:
        raise PolicyLoadError(f"{source.file}: NodePolicy {source.name}: spec: give params or "
                              "paramsFile, not both")
    if spec.params_file is None:
        return spec.params or {}, None
    params_path = Path(spec.params_file)
    if not params_path.is_absolute():
        params_path = source.file.parent / params_path
    try:
        return yaml.safe_load(params_path.read_text(encoding="utf-8")) or {}, params_path
    except OSError as exc:
        raise PolicyLoadError(f"NodePolicy {source.name}: paramsFile {params_path}: "
                              f"{exc.strerror or exc}") from None
    except yaml.YAMLError:
        raise PolicyLoadError(f"NodePolicy {source.name}: paramsFile {params_path}: "
                              "not valid YAML") from None
