"""The webhook request as msgspec Structs: the policy server's request decoder is built on them.

The contract of record for the JSON Schemas is pydantic's strict ``WebhookRequest``
(webhook_models). The policy server decodes requests with these Structs only
(policy_server.engine.request, which adds ValidateContainerAdjustment's keys); a body they
refuse is refused with msgspec's own path and message. Parsing a node's Synchronize with the
model was most of the policy server's work for that call (46-73 ms at 1,000 pods, 0.26-0.31 s
at 5,000; msgspec decodes the same bodies in 12-20 ms and 71-90 ms; docs/performance.md).

``decode`` takes a **subset** of what the strict model takes, never more, so a body it takes is
one the contract takes too:

- every NRI message is built from the same descriptors as nri_models, with the same types
  (strings no longer than ``field_limits`` allows their field, booleans, enum names or
  integers, lists, string- and integer-keyed maps, Optional* wrappers as plain values), every
  field optional, unknown keys refused;
- the integer bounds are the model's, except that unsigned 64-bit values stop at 2**63 - 1
  (msgspec takes integers of any size and cannot bound one at 2**64 - 1);
- the envelope holds the keys of every event but ValidateContainerAdjustment (``adjust``,
  ``update``, ``owners`` and ``plugins`` are unknown keys here), ``budget_ms`` stops at
  2**63 - 1, and an absent ``api_version`` is ``UNSET`` (the request path refuses it);
- a duplicated key is refused if any of its values is wrong (the model reads the last one).

tests/bridge/contract/test_request_structs.py decodes the recorded requests, thousands of
mutations of them and every scalar field at its edges both ways: whatever this takes, the model
takes, with the same values.
Owns that mirror and nothing else; it does no I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec
from google.protobuf.descriptor import FieldDescriptor

from bridge.contract.catalogue import API_VERSION, EVENT_NAMES
from bridge.contract.convert import INT_RANGES
from bridge.contract.descriptor_types import field_type
from bridge.contract.field_limits import KEY, NAME, Limit, limit_of
from bridge.proto.nri import api_pb2

FD = FieldDescriptor
_INT64_MAX = 2**63 - 1
# The models' bounds, but no higher than int64's: msgspec cannot bound an integer above it, so an
# unsigned 64-bit value past it is refused here and answered by the model.
_INT_BOUNDS = {kind: (lo, min(hi, _INT64_MAX)) for kind, (lo, hi) in INT_RANGES.items()}

# The value of an envelope key the body does not have (``api_version``: refused when absent).
ABSENT: Any = msgspec.UNSET
_STRUCTS: dict[str, type[msgspec.Struct] | None] = {}


def _text(limit: Limit) -> Any:
    """A string within ``limit``'s length (its other rules: policy_server.engine.request_fields)."""
    return Annotated[str, msgspec.Meta(max_length=limit.max_length)]


def _scalar_type(fd: Any, limit: Limit) -> Any:
    if fd.type in (FD.TYPE_STRING, FD.TYPE_BYTES):
        return _text(limit)
    if fd.type == FD.TYPE_BOOL:
        return bool
    if fd.type in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[fd.type]
        return Annotated[int, msgspec.Meta(ge=lo, le=hi)]
    if fd.type == FD.TYPE_ENUM:
        return Literal[tuple(fd.enum_type.values_by_name)] | int
    # No float field in the messages a request carries; a new one must be mirrored with care
    # (JSON number forms), so it is refused here rather than guessed.
    raise TypeError(f"unsupported field type {fd.type} for {fd.full_name}")


def _map_key(fd: Any) -> Any:
    if fd.type == FD.TYPE_STRING:
        return _text(KEY)
    if fd.type in _INT_BOUNDS:  # FieldOwners' field numbers: JSON object keys as text
        return int
    raise TypeError(f"{fd.full_name}: only string- and integer-keyed maps are mirrored")


def _field_type(fd: Any, limit: Limit) -> Any:
    return field_type(fd, lambda inner: _scalar_type(inner, limit), nri_struct, _map_key)


def nri_struct(name: str) -> type[msgspec.Struct]:
    """The Struct for NRI message ``name`` (built once)."""
    cached = _STRUCTS.get(name)
    if cached is not None:
        return cached
    if name in _STRUCTS:
        raise TypeError(f"NRI message {name} contains itself: not mirrored")
    _STRUCTS[name] = None
    desc = api_pb2.DESCRIPTOR.message_types_by_name[name]
    fields = [
        (fd.name, _field_type(fd, limit_of(name, fd.name)) | None, None) for fd in desc.fields
    ]
    struct = msgspec.defstruct(name, fields, forbid_unknown_fields=True, module=__name__)
    _STRUCTS[name] = struct
    return struct


PodSandbox: Any = nri_struct("PodSandbox")
Container: Any = nri_struct("Container")
LinuxResources: Any = nri_struct("LinuxResources")


_Name: Any = _text(NAME)


class RuntimeRef(msgspec.Struct, forbid_unknown_fields=True):
    name: _Name
    version: _Name
    nri_version: _Name | None = None
    capabilities: list[_Name] | None = None


class Request(msgspec.Struct, forbid_unknown_fields=True):
    """``WebhookRequest`` without the ValidateContainerAdjustment keys."""

    uid: _Name
    event: Literal[EVENT_NAMES]  # type: ignore[valid-type]
    runtime: RuntimeRef
    budget_ms: Annotated[int, msgspec.Meta(ge=0, le=_INT64_MAX)]
    api_version: Literal[API_VERSION] | msgspec.UnsetType = msgspec.UNSET  # type: ignore[valid-type]
    dry_run: bool = False
    pod: PodSandbox | None = None
    container: Container | None = None
    linux_resources: LinuxResources | None = None
    overhead_linux_resources: LinuxResources | None = None
    pods: list[PodSandbox] | None = None
    containers: list[Container] | None = None


class State(msgspec.Struct, forbid_unknown_fields=True):
    """The bridge's state (``GET /v1/state``'s pods and containers) as the request carries them."""

    pods: list[PodSandbox]
    containers: list[Container]


_REQUEST = msgspec.json.Decoder(Request)
_STATE = msgspec.json.Decoder(State)
T = TypeVar("T")


def _decoded(decoder: msgspec.json.Decoder[T], raw: bytes) -> T | None:
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        # DecodeError covers ValidationError; ValueError: bytes that are not UTF-8.
        return None


def decode(raw: bytes) -> Request | None:
    """The request if these Structs take ``raw`` (then the strict model takes it too), else
    None: ask the model."""
    return _decoded(_REQUEST, raw)


def decode_state(raw: bytes) -> State | None:
    """``{"pods": [...], "containers": [...]}`` as ``decode`` takes it, else None."""
    return _decoded(_STATE, raw)
