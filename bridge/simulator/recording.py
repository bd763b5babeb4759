"""Wire logs recorded from real runtimes: each line back into the bytes that were sent.

A wire log (`*-wire.jsonl`, see bridge/simulator/scenarios/README.md) has one line per
RPC a recording plugin received: `rpc`, `request` and `response` in canonical
protobuf JSON, and, for a plugin built on an older NRI schema,
`unknown_fields` — fields of the request that schema did not know (e.g.
Configure's timeouts and NRI_version, Container.user), each with its path,
number, wire type and value. Our schema knows them all, so a line is turned
back into the request the runtime actually sent by re-encoding those fields
onto the parsed message.

Owns: parsing a wire line into (rpc, event, request message, recorded
response). Must not: run anything (the scenario
loader and the tests drive the simulator and the bridge with these).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import DecodeError, Message

from bridge.contract.catalogue import EVENTS_BY_RPC, REQUEST_TYPES, RESPONSE_TYPES, NriEvent
from bridge.proto.nri import api_pb2 as api

# The Plugin-service messages of the RPCs a runtime sends that are not events.
_HANDSHAKE_TYPES: dict[str, tuple[type[Message], type[Message]]] = {
    "Configure": (api.ConfigureRequest, api.ConfigureResponse),
    "Synchronize": (api.SynchronizeRequest, api.SynchronizeResponse),
    "StateChange": (api.StateChangeEvent, api.Empty),
}
_WIRE_TYPES = {"varint": 0, "i64": 1, "bytes": 2, "i32": 5}


class RecordingError(Exception):
    """A wire-log line that cannot be turned back into a request."""


@dataclass(frozen=True, slots=True)
class WireLine:
    """One recorded RPC: what the runtime sent and what the recording plugin answered."""

    rpc: str
    event: NriEvent | None  # the StateChange event; for a dedicated RPC, its event
    request: Message
    response: Message

    @property
    def step(self) -> tuple[str, str]:
        """(rpc, StateChange event name or "") — one element of an RPC sequence."""
        if self.rpc == "StateChange" and self.event is not None:
            return self.rpc, self.event.name
        return self.rpc, ""


def message_types(rpc: str) -> tuple[type[Message], type[Message]]:
    """Request and response types of a Plugin-service RPC."""
    if rpc in _HANDSHAKE_TYPES:
        return _HANDSHAKE_TYPES[rpc]
    if rpc not in EVENTS_BY_RPC:
        raise RecordingError(f"unknown rpc {rpc!r}")
    event = EVENTS_BY_RPC[rpc]
    return REQUEST_TYPES[event], RESPONSE_TYPES[event]


def parse_line(raw: Mapping[str, Any], where: str = "wire line") -> WireLine:
    rpc = raw.get("rpc")
    if not isinstance(rpc, str):
        raise RecordingError(f"{where}: no rpc")
    request_type, response_type = message_types(rpc)
    try:
        request = ParseDict(raw.get("request") or {}, request_type())
        response = ParseDict(raw.get("response") or {}, response_type())
    except ParseError as exc:
        raise RecordingError(f"{where}: {exc}") from None
    for unknown in raw.get("unknown_fields") or ():
        _restore(request, unknown, where)
    if rpc == "StateChange":
        try:
            event: NriEvent | None = NriEvent(request.event)  # type: ignore[attr-defined]
        except ValueError:
            event = None
    else:
        event = EVENTS_BY_RPC.get(rpc)
    return WireLine(rpc, event, request, response)


# -- unknown fields -------------------------------------------------------------------------

def _restore(request: Message, unknown: Mapping[str, Any], where: str) -> None:
    """Put one field the recording plugin's schema did not know back onto `request`."""
    target = request
    path = str(unknown.get("path") or "")
    for name in filter(None, path.split(".")):
        if name not in target.DESCRIPTOR.fields_by_name:
            raise RecordingError(f"{where}: unknown field path {path!r}")
        target = getattr(target, name)
    number, wire = unknown.get("field"), unknown.get("wire")
    if not isinstance(number, int) or wire not in _WIRE_TYPES:
        raise RecordingError(f"{where}: bad unknown field {dict(unknown)!r}")
    encoded = _varint(number << 3 | _WIRE_TYPES[wire]) + _value(wire, unknown.get("value"), where)
    try:
        target.MergeFromString(encoded)  # appends the field as the runtime encoded it
    except DecodeError as exc:
        raise RecordingError(f"{where}: field {number} at {path!r}: {exc}") from None


def _value(wire: str, value: Any, where: str) -> bytes:
    if wire == "varint" and isinstance(value, int):
        return _varint(value & 0xFFFFFFFFFFFFFFFF)  # negative int64 -> ten-byte two's complement
    if wire == "bytes" and isinstance(value, str):
        data = bytes.fromhex(value[4:]) if value.startswith("hex:") else value.encode()
        return _varint(len(data)) + data
    raise RecordingError(f"{where}: cannot encode a {wire} field from {value!r}")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
