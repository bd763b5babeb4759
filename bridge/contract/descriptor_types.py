"""The Python type of an NRI field in webhook JSON form, from its protobuf descriptor.

Shared by the pydantic models (nri_models) and the msgspec Structs (request_structs), which
differ only in how a scalar, a nested message and a map key are typed: lists for repeated
fields, dicts for maps, NRI's Optional* wrappers as their plain value (a list for a repeated
one). Owns that walk; it builds no type of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import FieldDescriptor

from bridge.contract.convert import is_wrapper

Typer = Callable[[Any], Any]


def field_type(fd: Any, scalar: Typer, message: Callable[[str], Any], map_key: Typer) -> Any:
    """The type of field ``fd``: ``scalar(fd)`` for a scalar, ``message(name)`` for a message,
    ``map_key(key_fd)`` for a map's keys."""
    entry = fd.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key = map_key(entry.fields_by_name["key"])
        value = _value_type(entry.fields_by_name["value"], scalar, message)
        return dict[key, value]  # type: ignore[valid-type]
    if fd.is_repeated:
        return list[_value_type(fd, scalar, message)]  # type: ignore[misc]
    return _value_type(fd, scalar, message)


def _value_type(fd: Any, scalar: Typer, message: Callable[[str], Any]) -> Any:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        if is_wrapper(fd.message_type):
            inner = fd.message_type.fields_by_name["value"]
            item = scalar(inner)
            return list[item] if inner.is_repeated else item  # type: ignore[valid-type]
        return message(fd.message_type.name)
    return scalar(fd)
