"""What a ``cel`` mutation may change, and the check of its constant parts at load.

Owns ``change(event, container_id, doc)``: the policy's merged mutations (a JSON document) as
the ``Decision`` the reply carries, built by the SDK's readers of reply JSON
(``adjustment_from_json``, ``ResourcePatch.from_json``), which check every field and value
against the reply contract (a value outside it raises ``ValueError`` naming the field: at run
time the policy's ``failurePolicy`` decides for its own part); and ``check(event, kind, tree,
params)``, the same at load for what an expression's syntax tree fixes (literals and paths into
``params``): every constant key of a map literal must be a field the event's reply can carry
there (``image``, ``name`` or a JSON Patch on ``/image`` on CreateContainer, ``env`` on
UpdateContainer are refused), and the constant values (a map's constant entries, a list's
wholly constant items, a JSON Patch ``add``/``replace`` with a constant path and value) go
through ``change`` as they would at run time, so ``shares: -5`` fails to load rather than at
every matching container. What each event may change comes from the event's reply JSON Schema
(``reply_schema``, generated from the contract's models): CreateContainer's ``adjust``,
UpdateContainer's ``update[].linux`` (the container being updated; its id is the request's).
Several unknown keys are named sorted, so a message does not depend on a map's order.
``refusal(event, pointer, value)``: that check for one field (for the contract's range walk).
Must not evaluate.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

from policy_server import (
    ContainerUpdate,
    Decision,
    EventName,
    ResourcePatch,
    adjustment_from_json,
    reply_schema,
)
from policy_server.policies.cel import references
from policy_server.policies.cel.node_policy_doc import PatchType

_PARAMS = frozenset({"params"})


class _Unknown:
    """A part of a mutation known only at run time."""

    def __repr__(self) -> str:
        return "<run time>"


UNKNOWN: Any = _Unknown()
_SOME_ID = "load-check"  # at load there is no container: the update's id is the request's


def sorted_doc(value: Any) -> Any:
    """``value`` with every map's keys in sorted order (cel-cpp's map order varies per run)."""
    if isinstance(value, dict):
        return {k: sorted_doc(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [sorted_doc(v) for v in value]
    return value


def change(event: EventName, container_id: str, doc: Mapping[str, Any]) -> Decision:
    """The merged mutations as a decision; ``ValueError`` naming the field for a document
    outside the reply contract or a field the event cannot carry."""
    _check_keys(event, doc)
    if event is EventName.CREATE_CONTAINER:
        return Decision(adjust=adjustment_from_json(doc))
    # The reply carries it as an update of the container: a refusal names that path.
    patch = ResourcePatch.from_json((doc.get("linux") or {}).get("resources"),
                                    "update/[]/linux/resources")
    return Decision(update=(ContainerUpdate(container_id, patch),))


@functools.cache
def _defs(event: EventName) -> Mapping[str, Any]:
    defs: Mapping[str, Any] = reply_schema(event).get("$defs", {})
    return defs


def _resolve(event: EventName, node: Any) -> Any:
    """``node`` with its ``$ref`` followed and ``T | null`` taken as T."""
    while isinstance(node, Mapping):
        if "$ref" in node:
            node = _defs(event)[node["$ref"].rsplit("/", 1)[-1]]
            continue
        options = [o for o in node.get("anyOf") or () if o.get("type") != "null"]
        if len(options) == 1:
            node = options[0]
            continue
        return node
    return {}


@functools.cache
def _root(event: EventName) -> Mapping[str, Any]:
    """What a mutation document may hold on ``event``, as a JSON Schema object."""
    reply = reply_schema(event)["properties"]
    if event is EventName.CREATE_CONTAINER:
        return dict(_resolve(event, reply["adjust"]))
    update = _resolve(event, _resolve(event, reply["update"]).get("items"))
    # The container being updated is the request's; its id and failure mode are not the
    # policy's to say: only what the update changes.
    return {"type": "object", "properties": {"linux": update["properties"]["linux"]}}


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Fields:
    """What the reply has at one place of a mutation document, resolved once per event: an
    object's fields (``fields``, and their names as a message says them), a list's items, a
    map's values; None where the place holds a scalar."""

    __slots__ = ("fields", "items", "known", "values")

    def __init__(self) -> None:
        self.fields: dict[str, _Fields] | None = None
        self.known = ""
        self.items: _Fields | None = None
        self.values: _Fields | None = None


def _fields_of(event: EventName, node: Mapping[str, Any], depth: int = 0) -> _Fields:
    out = _Fields()
    if depth > 32:  # a recursive schema: deeper than any mutation; the SDK checks the rest
        return out
    properties = node.get("properties")
    if properties is not None:
        out.fields = {k: _fields_of(event, _resolve(event, v), depth + 1)
                      for k, v in properties.items()}
        out.known = ", ".join(sorted(properties))
    elif "items" in node:
        out.items = _fields_of(event, _resolve(event, node["items"]), depth + 1)
    elif isinstance(node.get("additionalProperties"), Mapping):
        out.values = _fields_of(event, _resolve(event, node["additionalProperties"]), depth + 1)
    return out


@functools.cache
def _root_fields(event: EventName) -> _Fields:
    return _fields_of(event, _root(event))


def _check_keys(event: EventName, value: Any, path: str = "",
                where: _Fields | None = None) -> None:
    """Every constant key of ``value`` is a field the reply has there; raises ``ValueError``."""
    node = _root_fields(event) if where is None else where
    if isinstance(value, dict):
        if node.fields is not None:
            fields = node.fields
            for key, item in value.items():
                inner = fields.get(key) if key is not UNKNOWN else None
                if inner is None and key is not UNKNOWN:
                    _unknown_keys(event, value, fields, node.known, path)
                if inner is not None and isinstance(item, (dict, list)):
                    _check_keys(event, item, _where(path, key), inner)
        elif node.values is not None:
            for key, item in value.items():
                if isinstance(item, (dict, list)):
                    _check_keys(event, item, f"{path}[{key!r}]", node.values)
    elif isinstance(value, list) and node.items is not None:
        for i, item in enumerate(value):
            if isinstance(item, (dict, list)):
                _check_keys(event, item, f"{path}[{i}]", node.items)


def _unknown_keys(event: EventName, value: Mapping[Any, Any], fields: Mapping[str, Any],
                  known: str, path: str) -> None:
    unknown = sorted(str(k) for k in value if k is not UNKNOWN and k not in fields)
    what = ", ".join(_where(path, k) for k in unknown)
    verb = "is no field" if len(unknown) == 1 else "are no fields"
    raise ValueError(f"{what}: {verb} {event} may change here (known: {known})")


def _data(value: Any) -> Any:
    """A params value as JSON data (UNKNOWN for what is not: a YAML date, bytes)."""
    if isinstance(value, Mapping):
        return {k: _data(v) for k, v in value.items()} if all(
            isinstance(k, str) for k in value) else UNKNOWN
    if isinstance(value, list):
        return [_data(v) for v in value]
    return value if value is None or isinstance(value, (str, int, float)) else UNKNOWN


def _param(steps: tuple[str, ...], params: Any) -> Any:
    node = params
    for step in steps[1:]:
        if not isinstance(node, Mapping) or step not in node:
            return UNKNOWN  # an error at run time: the policy's failurePolicy
        node = node[step]
    return _data(node)


def constant(expr: Any, params: Any = UNKNOWN) -> Any:
    """What an expression tree is when it is made of literals (maps, lists, constants) and
    paths into ``params`` (the policy's, fixed per load); ``UNKNOWN`` where a part is known
    only at run time (a map keeps its constant entries)."""
    steps = references.chain(expr, _PARAMS)
    if steps is not None:
        return _param(steps, params) if params is not UNKNOWN else UNKNOWN
    kind = expr.WhichOneof("expr_kind")
    if kind == "const_expr":
        const = expr.const_expr
        which = const.WhichOneof("constant_kind")
        if which is None or which == "bytes_value":
            return UNKNOWN
        return None if which == "null_value" else getattr(const, which)
    if kind == "list_expr":
        return [constant(e, params) for e in expr.list_expr.elements]
    if kind == "struct_expr" and all(e.HasField("map_key") for e in expr.struct_expr.entries):
        out: dict[Any, Any] = {}
        for entry in expr.struct_expr.entries:
            key = constant(entry.map_key, params)
            out[key if isinstance(key, str) else UNKNOWN] = constant(entry.value, params)
        return out
    return UNKNOWN


def _whole(value: Any) -> bool:
    if isinstance(value, dict):
        return UNKNOWN not in value and all(_whole(v) for v in value.values())
    if isinstance(value, list):
        return all(_whole(v) for v in value)
    return value is not UNKNOWN


def _known(value: Any, in_list: bool = False) -> Any:
    """The parts of ``value`` fixed at load: a map's known entries (outside a list no field of
    the reply is required), a list's wholly known items; UNKNOWN if none."""
    if isinstance(value, dict):
        if in_list and not _whole(value):
            return UNKNOWN
        kept = {k: _known(v) for k, v in value.items() if k is not UNKNOWN}
        kept = {k: v for k, v in kept.items() if v is not UNKNOWN}
        return kept if kept or not value else UNKNOWN
    if isinstance(value, list):
        return [v for v in value if _whole(v)]
    return value


def _pointer_doc(event: EventName, pointer: str, value: Any) -> dict[str, Any]:
    """A document holding ``value`` at the JSON Pointer ``pointer`` (RFC 6901), lists where the
    reply has lists; ``ValueError`` for a path through a field the reply has not."""
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
    if not tokens or not pointer.startswith("/"):
        raise ValueError(f"JSON Patch path {pointer!r}: not a path into the mutation")
    node: Mapping[str, Any] = _root(event)
    steps: list[tuple[str, Mapping[str, Any]]] = []
    path = ""
    for token in tokens:
        steps.append((token, node))
        properties = node.get("properties")
        if properties is not None:
            if token not in properties:
                known = ", ".join(sorted(properties))
                raise ValueError(f"JSON Patch path {pointer}: {_where(path, token)} is no field "
                                 f"{event} may change here (known: {known})")
            node = _resolve(event, properties[token])
        elif "items" in node:
            node = _resolve(event, node["items"])
        elif isinstance(node.get("additionalProperties"), Mapping):
            node = _resolve(event, node["additionalProperties"])
        else:
            return {}  # below a scalar: the patch fails at run time (or the SDK refuses)
        path = _where(path, token)
    doc = value
    for token, parent in reversed(steps):
        doc = [doc] if "items" in parent and "properties" not in parent else {token: doc}
    return doc if isinstance(doc, dict) else {}


def _patched(event: EventName, operations: Any) -> Iterator[dict[str, Any]]:
    """Per JSON Patch operation with a constant path: a document of what it sets (its value,
    when constant), after checking that the path is a field the reply has."""
    if not isinstance(operations, list):
        return
    for op in operations:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            continue
        value = op.get("value", UNKNOWN) if op.get("op") in ("add", "replace") else UNKNOWN
        value = value if _whole(value) else UNKNOWN
        doc = _pointer_doc(event, op["path"], None if value is UNKNOWN else value)
        if value is not UNKNOWN:
            yield doc


def check(event: EventName, kind: PatchType, expr: Any, params: Any = UNKNOWN) -> None:
    """The mutation ``expr`` (its syntax tree; ``params``: the policy's) on ``event``:
    ``ValueError`` naming the field when what it fixes at load is no field of the event's
    reply, or outside the contract."""
    value = constant(expr, params)
    if kind is PatchType.JSON_PATCH:
        for doc in _patched(event, value):
            change(event, _SOME_ID, sorted_doc(doc))
        return
    if not isinstance(value, dict):
        return
    _check_keys(event, value)
    known = _known(value)
    if isinstance(known, dict):
        change(event, _SOME_ID, sorted_doc(known))


def refusal(event: EventName, pointer: str, value: Any) -> str | None:
    """Why a constant mutation setting ``value`` at the JSON Pointer ``pointer`` of ``event``'s
    mutation document (``/linux/resources/cpu/shares``) fails to load, or None: the load check
    for one field, for a test walking the contract's ranges."""
    try:
        change(event, _SOME_ID, sorted_doc(_pointer_doc(event, pointer, value)))
    except ValueError as exc:
        return str(exc)
    return None
