"""Pydantic models for NRI messages, derived from the protobuf descriptors.

The JSON conventions are those of bridge.contract.convert: proto field names,
64-bit integers as numbers (range-checked), Optional* wrappers as plain values,
enums as names (an integer is accepted for values newer than our schema),
every field optional, unknown keys forbidden.
"""

from __future__ import annotations

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


def _field_type(fd: Any) -> Any:
    return field_type(fd, _scalar_type, nri_model, _map_key)


def nri_model(name: str) -> type[NriModel]:
    """The pydantic model for NRI message `name` (built once, cached)."""
    cached = NRI_MODELS.get(name)
    if cached is not None:
        return cached
    desc = api_pb2.DESCRIPTOR.message_types_by_name[name]
    # Register a forward reference first so recursive/shared types resolve.
    fields: dict[str, Any] = {}
    model = create_model(name, __base__=NriModel, __module__=__name__)
    NRI_MODELS[name] = model
    for fd in desc.fields:
        fields[fd.name] = (_field_type(fd) | None, None)
    model = create_model(name, __base__=NriModel, __module__=__name__, **fields)
    model.__doc__ = f"NRI {name} (nri.pkg.api.v1alpha1.{name}) in webhook JSON form."
    NRI_MODELS[name] = model
    return model
