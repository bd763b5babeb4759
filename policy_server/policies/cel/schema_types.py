"""The webhook contract's JSON Schemas as CEL types, so expressions are checked like a VAP's.

Owns turning an event's request JSON Schema (``request_schema``, from the SDK) into protobuf
message types in a private descriptor pool, one message per ``$defs`` entry (inline objects get
``<Parent>_<field>``), and the CEL variable declarations of an event: one variable per top-level
key of its request (``pod``, ``container``, ``adjust``, ``runtime``, ...). The types serve the
type checker only (a misspelt ``container.linux.resource`` is "undefined field"); requests are
evaluated as plain JSON maps, so an absent field is a "no such key" error, as an unstructured
object is in Kubernetes, and ``has()`` tests presence. Mapping: integer -> int, number ->
double, boolean -> bool, string -> string, ``T | null`` -> T, array -> list, an object with
``additionalProperties`` -> map(string, T); anything a proto field cannot say (a list of lists,
a map of maps, a union) -> dyn (``google.protobuf.Value``). Must not evaluate or do I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, struct_pb2

from policy_server import EventName, request_schema

PACKAGE = "nriwebhook"
_DYN = ".google.protobuf.Value"
_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "integer": _F.TYPE_INT64,
    "number": _F.TYPE_DOUBLE,
    "boolean": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
}
_ENVELOPE_SKIP = frozenset({"api_version"})


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _unwrap(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """``T | null`` -> T; a union of several types stays as it is (dyn)."""
    options = node.get("anyOf")
    if options:
        real = [o for o in options if o.get("type") != "null"]
        if len(real) == 1:
            return dict(real[0])
    return node


class _Builder:
    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs
        self.file = descriptor_pb2.FileDescriptorProto(
            name=f"{PACKAGE}.proto", package=PACKAGE, syntax="proto3",
            dependency=["google/protobuf/struct.proto"],
        )
        self.done: set[str] = set()

    def message(self, name: str, schema: Mapping[str, Any]) -> str:
        """The message for an object schema (built once); its full name."""
        if name not in self.done:
            self.done.add(name)
            msg = self.file.message_type.add(name=name)
            for number, (field, node) in enumerate(sorted(schema.get("properties", {}).items()), 1):
                self._field(msg, name, field, number, node)
        return f".{PACKAGE}.{name}"

    def _field(self, msg: Any, parent: str, field: str, number: int, node: Any) -> None:
        node = _unwrap(node)
        label = _F.LABEL_OPTIONAL
        if node.get("type") == "array":
            label = _F.LABEL_REPEATED
            node = _unwrap(node.get("items", {}))
            if node.get("type") in ("array", None) and "$ref" not in node:
                msg.field.add(name=field, number=number, label=label, type=_F.TYPE_MESSAGE,
                              type_name=_DYN)
                return
        values = node.get("additionalProperties")
        if node.get("type") == "object" and isinstance(values, dict) and label != _F.LABEL_REPEATED:
            entry = msg.nested_type.add(name=f"{field.title().replace('_', '')}Entry")
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL, type=_F.TYPE_STRING)
            self._typed(entry, "value", 2, _F.LABEL_OPTIONAL, _unwrap(values), f"{parent}_{field}",
                        nested_ok=False)
            msg.field.add(name=field, number=number, label=_F.LABEL_REPEATED,
                          type=_F.TYPE_MESSAGE, type_name=f".{PACKAGE}.{parent}.{entry.name}")
            return
        self._typed(msg, field, number, label, node, f"{parent}_{field}", nested_ok=True)

    def _typed(self, msg: Any, field: str, number: int, label: int, node: Mapping[str, Any],
               inline_name: str, nested_ok: bool) -> None:
        kind = node.get("type")
        if "$ref" in node:
            name = _ref_name(node["$ref"])
            type_name = self.message(name, self.defs[name])
            msg.field.add(name=field, number=number, label=label, type=_F.TYPE_MESSAGE,
                          type_name=type_name)
        elif kind in _SCALARS:
            msg.field.add(name=field, number=number, label=label, type=_SCALARS[kind])
        elif kind == "object" and "properties" in node and nested_ok:
            type_name = self.message(inline_name, node)
            msg.field.add(name=field, number=number, label=label, type=_F.TYPE_MESSAGE,
                          type_name=type_name)
        elif "const" in node and isinstance(node["const"], str):
            msg.field.add(name=field, number=number, label=label, type=_F.TYPE_STRING)
        else:
            msg.field.add(name=field, number=number, label=label, type=_F.TYPE_MESSAGE,
                          type_name=_DYN)


@functools.cache
def _pool_and_roots() -> tuple[descriptor_pool.DescriptorPool, Mapping[str, Mapping[str, str]]]:
    """One pool for every event (their ``$defs`` are the contract's, shared); per event, its
    top-level request keys -> the type name each is declared with."""
    builder: _Builder | None = None
    roots: dict[str, dict[str, str]] = {}
    for event in EventName:
        schema = request_schema(event)
        if builder is None:
            builder = _Builder(schema.get("$defs", {}))
        root = builder.message(f"{event.value}Request", schema)
        roots[event.value] = {"": root}
        for key in schema.get("properties", {}):
            if key not in _ENVELOPE_SKIP:
                roots[event.value][key] = root
    assert builder is not None
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(builder.file)
    return pool, roots


def pool() -> descriptor_pool.DescriptorPool:
    return _pool_and_roots()[0]


def request_keys(event: EventName) -> tuple[str, ...]:
    """The variables an expression on ``event`` sees besides ``params`` and ``variables``."""
    return tuple(k for k in _pool_and_roots()[1][event.value] if k)


def declarations(event: EventName) -> dict[str, Any]:
    """``event``'s request keys -> their CEL types, for the type checker."""
    desc = pool().FindMessageTypeByName(f"{PACKAGE}.{event.value}Request")
    out: dict[str, Any] = {}
    for key in request_keys(event):
        field = desc.fields_by_name[key]
        out[key] = _cel_type(field)
    return out


def _cel_type(field: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value = field.message_type.fields_by_name["value"]
        return cel.Type.Map(cel.Type.STRING, _cel_type(value))
    if field.is_repeated:
        return cel.Type.List(_element_type(field))
    return _element_type(field)


def _element_type(field: Any) -> Any:
    if field.message_type is not None:
        if field.message_type.full_name == "google.protobuf.Value":
            return cel.Type.DYN
        return cel.Type(field.message_type.full_name)
    return {
        _F.TYPE_INT64: cel.Type.INT, _F.TYPE_DOUBLE: cel.Type.DOUBLE,
        _F.TYPE_BOOL: cel.Type.BOOL, _F.TYPE_STRING: cel.Type.STRING,
    }[field.type]
