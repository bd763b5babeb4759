"""Which dotted paths an expectation may name: those some container's adjustment or effective
values can have.

Owns: the shape of both, as JSON Schemas — the adjustment's from the reply contract
(bridge.contract.webhook_models.Adjustment), the effective values' from the NRI models of the
parts `try` reports (bridge.kube.runtime_view.effective; tests pin the top-level keys to
schemas/try/output.schema.json) — and walking a path through a schema the way
bridge.suite.expect.lookup walks it through a value: keys that contain dots (`unified`,
`annotations`), list items by index. A path no value can have (`resource.memory.limit`) would
make every `null` expectation on it pass whatever the policy does, so a suite naming one is
refused before anything runs. Must not: look at any result.
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import Any

EFFECTIVE_KEYS = ("resources", "oom_score_adj", "env", "mounts", "devices", "cdi_devices",
                  "hooks", "rlimits", "annotations")
_INDEX = re.compile(r"-?\d+")
_MAX_DEPTH = 32  # the schemas are finite; a ceiling against a reference cycle


@functools.cache
def _adjust_schema() -> dict[str, Any]:
    from bridge.contract.webhook_models import Adjustment  # pydantic models load lazily

    schema: dict[str, Any] = Adjustment.model_json_schema()
    return schema


@functools.cache
def _effective_schema() -> dict[str, Any]:
    from bridge.contract.nri_models import nri_model

    defs: dict[str, Any] = {}

    def model(name: str) -> dict[str, Any]:
        schema = dict(nri_model(name).model_json_schema())
        defs.update(schema.pop("$defs", {}))
        return schema

    def items(name: str) -> dict[str, Any]:
        return {"type": "array", "items": model(name)}

    properties = {
        "resources": model("LinuxResources"), "oom_score_adj": {"type": "integer"},
        "env": {"type": "array", "items": {"type": "string"}}, "mounts": items("Mount"),
        "devices": items("LinuxDevice"), "cdi_devices": items("CDIDevice"),
        "hooks": model("Hooks"), "rlimits": items("POSIXRlimit"),
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}
    assert tuple(properties) == EFFECTIVE_KEYS
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "$defs": defs}


def problem(kind: str, path: str) -> str | None:
    """Why no container's adjustment (`kind` "adjust") or effective values ("effective") can
    have `path`, with the nearest spelling that exists; None when some can."""
    root = _adjust_schema() if kind == "adjust" else _effective_schema()
    parts = path.split(".")
    if _walk(root, root, parts, 0):
        return None
    known = sorted(_leaves(root, root, "", 0))
    near = difflib.get_close_matches(path, known, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else ""
    what = "adjustment" if kind == "adjust" else "effective values"
    return f"no container's {what} can have {path}{hint}"


def _resolve(root: dict[str, Any], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives `schema` stands for: references followed, anyOf/oneOf flattened,
    null dropped."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _resolve(root, root["$defs"][ref.removeprefix("#/$defs/")])
    out: list[dict[str, Any]] = []
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, []):
            out += _resolve(root, option)
    if not out and schema.get("type") != "null":
        out.append(schema)
    return out


def _walk(root: dict[str, Any], schema: dict[str, Any], parts: list[str], depth: int) -> bool:
    if not parts:
        return True
    if depth > _MAX_DEPTH:
        return False
    for option in _resolve(root, schema):
        properties = option.get("properties", {})
        for j in range(len(parts), 0, -1):  # a key may itself contain dots
            key = ".".join(parts[:j])
            if key in properties and _walk(root, properties[key], parts[j:], depth + 1):
                return True
        extra = option.get("additionalProperties")
        if isinstance(extra, dict):
            for j in range(len(parts), 0, -1):
                if _walk(root, extra, parts[j:], depth + 1):
                    return True
        if option.get("type") == "array" and _INDEX.fullmatch(parts[0]) \
                and _walk(root, option.get("items", {}), parts[1:], depth + 1):
            return True
    return False


def _leaves(root: dict[str, Any], schema: dict[str, Any], prefix: str, depth: int) -> set[str]:
    """Every path through named properties (maps and list items stop the walk): the
    spellings a suggestion is chosen from."""
    out: set[str] = set()
    if depth > 6:
        return out
    for option in _resolve(root, schema):
        for key, sub in option.get("properties", {}).items():
            path = f"{prefix}{key}"
            out.add(path)
            out |= _leaves(root, sub, f"{path}.", depth + 1)
    return out
