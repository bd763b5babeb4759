"""Pydantic models for NRI messages, derived from the protobuf descriptors.

The JSON conventions are those of bridge.contract.convert: proto field names,
64-bit integers as numbers (range-checked), Optional* wrappers as plain values,
enums as names (an integer is accepted for values newer than our schema),
every field optional, unknown keys forbidden. Two families share the shape: ``nri_model`` (the
request's messages, as a runtime sends them) and ``build_model`` with a ``Refine`` hook, which
bridge.contract.reply_models uses to add the reply's value rules (reply side only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from google.protobuf.descriptor import FieldDescriptor
from pydantic import BaseModel, ConfigDict, Field, create_model

from bridge.contract.convert import INT_RANGES
from bridge.contract.descriptor_types import field_type
from bridge.proto.nri import api_pb2

FD = FieldDescriptor


class NriModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


NRI_MODELS: dict[str, type[NriModel]] = {}


def _scalar_type(fd: Any) -> Any:
    if fd.type == FD.TYPE_STRING:
        return str
    if fd.type == FD.TYPE_BOOL:
        return bool
    if fd.type in INT_RANGES:
        lo, hi = INT_RANGES[fd.type]
        return Annotated[int, Field(ge=lo, le=hi, strict=True)]
    if fd.type == FD.TYPE_ENUM:
        names = tuple(fd.enum_type.values_by_name)
        return Literal[names] | Annotated[int, Field(strict=True)]
    if fd.type == FD.TYPE_BYTES:
        return str
    if fd.type in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        return float
    raise TypeError(f"unsupported field type {fd.type} for {fd.full_name}")


def _map_key(fd: Any) -> Any:
    return str if _scalar_type(fd) is str else int


# (message name, field descriptor, the field's type) -> (its type, its pydantic Field).
Refine = Callable[[str, Any, Any], tuple[Any, Any]]


def _plain(_message: str, _fd: Any, typ: Any) -> tuple[Any, Any]:
    return typ | None, None


def nri_model(name: str) -> type[NriModel]:
    """The pydantic model for NRI message `name` (built once, cached)."""
    return build_model(name, NRI_MODELS, _plain)


def build_model(name: str, cache: dict[str, type[NriModel]], refine: Refine) -> type[NriModel]:
    """The model for NRI message `name` in the family kept in ``cache``: each field's type
    (every one optional) as ``refine`` makes it from its descriptor's."""
    cached = cache.get(name)
    if cached is not None:
        return cached
    desc = api_pb2.DESCRIPTOR.message_types_by_name[name]
    # Register a forward reference first so recursive/shared types resolve.
    fields: dict[str, Any] = {}
    model = create_model(name, __base__=NriModel, __module__=__name__)
    cache[name] = model

    def message(inner: str) -> type[NriModel]:
        return build_model(inner, cache, refine)

    for fd in desc.fields:
        fields[fd.name] = refine(name, fd, field_type(fd, _scalar_type, message, _map_key))
    model = create_model(name, __base__=NriModel, __module__=__name__, **fields)
    model.__doc__ = f"NRI {name} (nri.pkg.api.v1alpha1.{name}) in webhook JSON form."
    cache[name] = model
    return model
