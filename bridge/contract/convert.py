"""Lossless conversion between NRI protobuf messages and the webhook JSON shape.

The JSON mirrors the protobuf with proto field names, with three deliberate
differences from canonical protobuf JSON, chosen for policy authors:
- 64-bit integers are JSON numbers, not strings;
- NRI's Optional* wrapper messages are plain values (`"shares": 512`, not
  `"shares": {"value": "512"}`); presence of the key means "set";
- enums are their names (numbers a newer runtime sends that we do not know
  come through as integers, so nothing is lost).

`to_json` emits only fields that are set. `from_json` is strict: an unknown
key, a wrong type or an out-of-range number raises ConversionError naming the
path, e.g. `linux.resources.cpu.shares: expected an integer in [0, 2**64)`.
Per-field decisions are computed once per descriptor and cached.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from bridge.errors import BridgeError

FD = FieldDescriptor
# The integer range of each protobuf integer type (also the JSON models' bounds).
INT_RANGES: dict[int, tuple[int, int]] = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1), FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1), FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1), FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1), FD.TYPE_FIXED64: (0, 2**64 - 1),
}

M = TypeVar("M", bound=Message)


class ConversionError(BridgeError):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path or '<root>'}: {problem}")
        self.path = path
        self.problem = problem


@functools.cache  # asked per message of every reply: decided once per type
def is_wrapper(desc: Any) -> bool:
    """NRI's presence wrappers: Optional* messages holding one field named value."""
    return desc.name.startswith("Optional") and list(desc.fields_by_name) == ["value"]


# -- protobuf -> JSON ---------------------------------------------------------------

_Out = Callable[[Any], Any]
# field -> (its JSON key, how its value converts; None: the value is already JSON's).
# Computed once per field. Scalars, repeated scalars and scalar maps convert in C
# (none, `list`, `dict`): a container's payload is ~100 values, converted once per event.
_out_cache: dict[Any, tuple[str, _Out | None]] = {}


def to_json(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        plan = _out_cache.get(fd)
        if plan is None:
            plan = _out_cache[fd] = (fd.name, _out_converter(fd))
        name, conv = plan
        out[name] = value if conv is None else conv(value)
    return out


def _to_json_list(values: Any) -> list[dict[str, Any]]:
    return [to_json(v) for v in values]


def _out_single(fd: Any) -> _Out | None:
    if fd.type == FD.TYPE_MESSAGE:
        if is_wrapper(fd.message_type):
            inner = fd.message_type.fields_by_name["value"]
            if inner.is_repeated:
                return lambda v: list(v.value)
            return lambda v: v.value
        return to_json
    if fd.type == FD.TYPE_ENUM:
        by_number = fd.enum_type.values_by_number

        def enum_name(v: int) -> Any:
            known = by_number.get(v)
            return known.name if known is not None else v
        return enum_name
    if fd.type == FD.TYPE_BYTES:
        return lambda v: base64.b64encode(v).decode()
    return None


def _out_converter(fd: Any) -> _Out | None:
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        value = _out_single(fd.message_type.fields_by_name["value"])
        if value is None:
            return dict
        return lambda m: {k: value(v) for k, v in m.items()}
    single = _out_single(fd)
    if not fd.is_repeated:
        return single
    if single is None:
        return list
    if single is to_json:
        return _to_json_list
    return lambda values: [single(v) for v in values]


# -- JSON -> protobuf ---------------------------------------------------------------


def from_json(data: Any, cls: type[M], path: str = "") -> M:
    msg = cls()
    fill(msg, data, path)
    return msg


def fill(msg: Message, data: Any, path: str) -> None:
    if not isinstance(data, dict):
        raise ConversionError(path, f"expected an object, got {_kind(data)}")
    fields: Any = msg.DESCRIPTOR.fields_by_name
    for key, value in data.items():
        fd = fields.get(key)
        sub = f"{path}.{key}" if path else key
        if fd is None:
            raise ConversionError(sub, f"unknown field for {msg.DESCRIPTOR.name}")
        if value is None:
            continue  # null means "not set"
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            _fill_map(getattr(msg, key), fd, value, sub)
        elif fd.is_repeated:
            if not isinstance(value, list):
                raise ConversionError(sub, f"expected a list, got {_kind(value)}")
            target = getattr(msg, key)
            for i, item in enumerate(value):
                item_path = f"{sub}[{i}]"
                if fd.type == FD.TYPE_MESSAGE:
                    _fill_message_value(target.add(), item, item_path)
                else:
                    target.append(_scalar(fd, item, item_path))
        elif fd.type == FD.TYPE_MESSAGE:
            _fill_message_value(getattr(msg, key), value, sub)
        else:
            setattr(msg, key, _scalar(fd, value, sub))


def _fill_message_value(target: Message, value: Any, path: str) -> None:
    desc: Any = target.DESCRIPTOR
    if is_wrapper(desc):
        inner = desc.fields_by_name["value"]
        if inner.is_repeated:
            if not isinstance(value, list):
                raise ConversionError(path, f"expected a list, got {_kind(value)}")
            # Wrapper messages (Optional*, *List) all keep their content in `value`.
            getattr(target, "value").extend(  # noqa: B009
                _scalar(inner, v, f"{path}[{i}]") for i, v in enumerate(value))
            target.SetInParent()
        else:
            setattr(target, "value", _scalar(inner, value, path))  # noqa: B010
            target.SetInParent()
        return
    fill(target, value, path)
    target.SetInParent()


def _fill_map(target: Any, fd: Any, value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise ConversionError(path, f"expected an object, got {_kind(value)}")
    key_fd = fd.message_type.fields_by_name["key"]
    value_fd = fd.message_type.fields_by_name["value"]
    for k, v in value.items():
        item_path = f"{path}[{k!r}]"
        key = _scalar(key_fd, int(k) if key_fd.type != FD.TYPE_STRING and _intlike(k) else k,
                      item_path)
        if value_fd.type == FD.TYPE_MESSAGE:
            _fill_message_value(target[key], v, item_path)
        else:
            target[key] = _scalar(value_fd, v, item_path)


def _intlike(text: Any) -> bool:
    return isinstance(text, str) and text.lstrip("-").isdigit()


def _scalar(fd: Any, value: Any, path: str) -> Any:
    t = fd.type
    if t == FD.TYPE_STRING:
        if not isinstance(value, str):
            raise ConversionError(path, f"expected a string, got {_kind(value)}")
        return value
    if t == FD.TYPE_BOOL:
        if not isinstance(value, bool):
            raise ConversionError(path, f"expected true or false, got {_kind(value)}")
        return value
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ConversionError(path, f"expected an integer, got {_kind(value)}")
        if not lo <= value <= hi:
            raise ConversionError(path, f"integer {value} out of range [{lo}, {hi}]")
        return value
    if t == FD.TYPE_ENUM:
        if isinstance(value, str):
            known = fd.enum_type.values_by_name.get(value)
            if known is None:
                names = ", ".join(fd.enum_type.values_by_name)
                raise ConversionError(path, f"unknown {fd.enum_type.name} {value!r} ({names})")
            return known.number
        if isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31:
            return value
        raise ConversionError(path, f"expected a {fd.enum_type.name} name, got {_kind(value)}")
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConversionError(path, f"expected a number, got {_kind(value)}")
        return float(value)
    if t == FD.TYPE_BYTES:
        if not isinstance(value, str):
            raise ConversionError(path, f"expected base64 text, got {_kind(value)}")
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise ConversionError(path, "invalid base64") from None
    raise ConversionError(path, f"unsupported field type {t}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
