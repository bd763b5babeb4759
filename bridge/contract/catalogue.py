"""The event catalogue: every NRI event the bridge knows, defined once.

Owns, per event: its wire name (the RPC name, also the webhook envelope's ``event``), its number
and subscription bit, its request and response message types, the payload keys the envelope
carries and the reply keys a policy may use (docs/protocol.md#configure-and-the-event-mask,
docs/protocol.md#how-events-are-delivered). Every other event list in the bridge and the policy
server is computed from ``CATALOGUE`` below; tests/bridge/contract/test_catalogue.py proves
it. Must not do I/O, import pydantic, or know about webhooks, handlers or HTTP.

Two enums name the events because their members must be visible to the type checker: ``Event``
(the 14 subscribable events, numbered as api.proto's ``Event`` enum, from which the numbers are
read) and ``EventName`` (those plus Synchronize, as strings). Their values are computed, never
spelled: an RPC name is the member name in CamelCase.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum, auto
from types import MappingProxyType
from typing import cast

from google.protobuf.message import Message

from bridge.proto.nri import api_pb2 as api

API_VERSION = "nri-webhook-bridge/v1"


def _camel(member_name: str) -> str:
    return "".join(word.capitalize() for word in member_name.split("_"))


class Event(IntEnum):
    """A subscribable NRI event; the value is api.proto's ``Event`` number."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list[int]) -> int:
        return int(api.Event.Value(name))

    RUN_POD_SANDBOX = auto()
    STOP_POD_SANDBOX = auto()
    REMOVE_POD_SANDBOX = auto()
    CREATE_CONTAINER = auto()
    POST_CREATE_CONTAINER = auto()
    START_CONTAINER = auto()
    POST_START_CONTAINER = auto()
    UPDATE_CONTAINER = auto()
    POST_UPDATE_CONTAINER = auto()
    STOP_CONTAINER = auto()
    REMOVE_CONTAINER = auto()
    UPDATE_POD_SANDBOX = auto()  # NRI v0.10.0+
    POST_UPDATE_POD_SANDBOX = auto()  # NRI v0.10.0+
    VALIDATE_CONTAINER_ADJUSTMENT = auto()  # NRI v0.10.0+

    @property
    def bit(self) -> int:
        """Event value e sets bit 1 << (e - 1) in ConfigureResponse.events
        (docs/protocol.md#configure-and-the-event-mask)."""
        return 1 << (self.value - 1)

    @property
    def rpc_name(self) -> str:
        return _camel(self.name)

    @property
    def proto(self) -> api.Event:
        """The same number typed as api.proto's enum, for StateChangeEvent.event."""
        return cast(api.Event, self.value)


class EventName(StrEnum):
    """An event as spelled in the webhook envelope, in lifecycle order (the order of the
    JSON Schemas and of ``GET /v1/policies``)."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list[str]) -> str:
        return _camel(name)

    SYNCHRONIZE = auto()
    RUN_POD_SANDBOX = auto()
    UPDATE_POD_SANDBOX = auto()
    POST_UPDATE_POD_SANDBOX = auto()
    STOP_POD_SANDBOX = auto()
    REMOVE_POD_SANDBOX = auto()
    CREATE_CONTAINER = auto()
    POST_CREATE_CONTAINER = auto()
    START_CONTAINER = auto()
    POST_START_CONTAINER = auto()
    UPDATE_CONTAINER = auto()
    POST_UPDATE_CONTAINER = auto()
    STOP_CONTAINER = auto()
    REMOVE_CONTAINER = auto()
    VALIDATE_CONTAINER_ADJUSTMENT = auto()


@dataclass(frozen=True, slots=True)
class EventSpec:
    """One row of the catalogue."""

    name: EventName
    event: Event | None  # None for Synchronize, which is not a subscribable event
    request_type: type[Message]
    response_type: type[Message]
    payload: tuple[str, ...]  # envelope keys taken from the request message, in field order
    reply_keys: frozenset[str]  # reply keys that mean something; others are a violation
    # The changes the response message can carry (`adjust`, `update`, `evict`), read from
    # api.proto: a reply may use exactly these, and the answer is built from them.
    changes: tuple[str, ...]

    @property
    def carries_update(self) -> bool:
        """The response carries ContainerUpdates (for other containers, or this one)."""
        return "update" in self.changes


# Reply parts. The changes (`adjust`, `update`, `evict`) are what the NRI response message
# carries, read from api.proto (only CreateContainerResponse has a ContainerAdjustment;
# Create/Update/Stop container and Synchronize carry ContainerUpdates; Create/Update carry
# evictions). The rows add what the bridge answers itself: a rejection can fail only an
# operation the runtime waits for; warnings are only logged. Post-events and removals cannot
# change or fail anything.
_WARN = ("warnings",)
_WAITED_ON = ("reject", "warnings")
_POD = ("pod",)
_CONTAINER = ("pod", "container")
_ROWS: tuple[tuple[EventName, tuple[str, ...], tuple[str, ...]], ...] = (
    (EventName.SYNCHRONIZE, ("pods", "containers"), _WARN),
    (EventName.RUN_POD_SANDBOX, _POD, _WAITED_ON),
    (EventName.UPDATE_POD_SANDBOX, ("pod", "overhead_linux_resources", "linux_resources"),
     _WAITED_ON),
    (EventName.POST_UPDATE_POD_SANDBOX, _POD, _WARN),
    (EventName.STOP_POD_SANDBOX, _POD, _WARN),
    (EventName.REMOVE_POD_SANDBOX, _POD, _WARN),
    (EventName.CREATE_CONTAINER, _CONTAINER, _WAITED_ON),
    (EventName.POST_CREATE_CONTAINER, _CONTAINER, _WARN),
    (EventName.START_CONTAINER, _CONTAINER, _WAITED_ON),
    (EventName.POST_START_CONTAINER, _CONTAINER, _WARN),
    (EventName.UPDATE_CONTAINER, ("pod", "container", "linux_resources"), _WAITED_ON),
    (EventName.POST_UPDATE_CONTAINER, _CONTAINER, _WARN),
    (EventName.STOP_CONTAINER, _CONTAINER, _WAITED_ON),
    (EventName.REMOVE_CONTAINER, _CONTAINER, _WARN),
    (EventName.VALIDATE_CONTAINER_ADJUSTMENT,
     ("pod", "container", "adjust", "update", "owners", "plugins"), _WAITED_ON),
)


_CHANGES = ("adjust", "update", "evict")


def _spec(name: EventName, payload: tuple[str, ...], answered: tuple[str, ...]) -> EventSpec:
    # api.proto names every event's messages <RPC name>Request / <RPC name>Response.
    request = getattr(api, f"{name.value}Request")
    response = getattr(api, f"{name.value}Response")
    event = None if name is EventName.SYNCHRONIZE else Event[name.name]
    changes = tuple(f.name for f in response.DESCRIPTOR.fields if f.name in _CHANGES)
    return EventSpec(name, event, request, response, payload,
                     frozenset(changes) | frozenset(answered), changes)


CATALOGUE: Mapping[EventName, EventSpec] = MappingProxyType(
    {name: _spec(name, payload, reply) for name, payload, reply in _ROWS}
)

# --- Views of the catalogue, for the modules that look events up one way. ---

EVENT_NAMES: tuple[str, ...] = tuple(name.value for name in CATALOGUE)
SPEC_OF: Mapping[Event, EventSpec] = MappingProxyType(
    {spec.event: spec for spec in CATALOGUE.values() if spec.event is not None}
)
RPC_NAMES: Mapping[Event, str] = MappingProxyType({e: e.rpc_name for e in Event})
EVENTS_BY_RPC: Mapping[str, Event] = MappingProxyType({e.rpc_name: e for e in Event})
# The request message each event's dedicated RPC carries (StateChange events are turned into
# these too, so handlers see one type per event).
REQUEST_TYPES: Mapping[Event, type[Message]] = MappingProxyType(
    {e: SPEC_OF[e].request_type for e in Event}
)
RESPONSE_TYPES: Mapping[Event, type[Message]] = MappingProxyType(
    {e: SPEC_OF[e].response_type for e in Event}
)
REQUEST_PAYLOAD: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name.value: spec.payload for name, spec in CATALOGUE.items()}
)
# Payload objects an envelope must carry (the scope objects; the rest are optional).
_SCOPE_KEYS = frozenset({"pod", "container", "pods", "containers"})
REQUIRED_PAYLOAD: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name.value: tuple(k for k in spec.payload if k in _SCOPE_KEYS)
     for name, spec in CATALOGUE.items()}
)
# Keyed by the event string; an EventName is a str, so either kind of key finds its row.
REPLY_KEYS: Mapping[str, frozenset[str]] = MappingProxyType(
    {name.value: spec.reply_keys for name, spec in CATALOGUE.items()}
)
# The response types that carry ContainerUpdates the runtime applies.
RESPONSES_WITH_UPDATES: frozenset[type[Message]] = frozenset(
    spec.response_type for spec in CATALOGUE.values() if spec.carries_update
)


def updates_in(response: Message | None) -> Sequence[api.ContainerUpdate]:
    """The ContainerUpdates a response carries; none for a type that carries none."""
    if response is None or type(response) not in RESPONSES_WITH_UPDATES:
        return ()
    updates: Sequence[api.ContainerUpdate] = response.update  # type: ignore[attr-defined]
    return updates
POD_EVENTS: frozenset[Event] = frozenset(
    e for e in Event if SPEC_OF[e].payload[0] == "pod" and "container" not in SPEC_OF[e].payload
)
CONTAINER_EVENTS: frozenset[EventName] = frozenset(
    name for name, spec in CATALOGUE.items() if "container" in spec.payload
)

# Events a runtime at or below NRI v0.9.x knows (LAST = 12): mask 0x07FF. v0.10.0 added events
# 12-14 (LAST = 15): mask 0x3FFF. Setting an unknown bit makes the runtime reject the plugin at
# Configure.
MASK_BEFORE_V0_10 = (1 << (12 - 1)) - 1
MASK_FROM_V0_10 = (1 << (int(api.Event.Value("LAST")) - 1)) - 1


def mask_of(events: frozenset[Event] | set[Event]) -> int:
    mask = 0
    for event in events:
        mask |= event.bit
    return mask


def events_of(mask: int) -> frozenset[Event]:
    return frozenset(e for e in Event if mask & e.bit)
