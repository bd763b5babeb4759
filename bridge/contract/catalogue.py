"""The event catalogue: every NRI event the bridge knows, defined once.

Owns, per event: its wire name (the RPC name, also the webhook envelope's ``event``), its number
and subscription bit, its request and response message types, the payload keys the envelope
carries, the reply keys a policy may use and the first NRI version that has it (``since``:
the event mask a runtime accepts and the events it sends are read from it)
(docs/protocol.md#configure-and-the-event-mask, docs/protocol.md#how-events-are-delivered).
Every other event list in the bridge and the policy server is computed from ``CATALOGUE``
below; tests/bridge/contract/test_catalogue.py proves it. Must not do I/O, import pydantic, or
know about webhooks, handlers or HTTP.

Two enums name the events because their members must be visible to the type checker:
``NriEvent`` (the 14 subscribable events, numbered as api.proto's ``Event`` enum, from which the
numbers are read) and ``EventName`` (those plus Synchronize, as strings). Their values are
computed, never spelled: an RPC name is the member name in CamelCase. ``NriEvent`` is a kind of
event on the NRI wire; the policy SDK's ``Event`` (policy_server.sdk.model) is one webhook
request, an occurrence of such a kind, and keeps its public name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum, auto
from types import MappingProxyType
from typing import cast

from google.protobuf.message import Message

from bridge.contract.nri_version import Version
from bridge.proto.nri import api_pb2 as api

API_VERSION = "nri-webhook-bridge/v1"


def _camel(member_name: str) -> str:
    return "".join(word.capitalize() for word in member_name.split("_"))


class NriEvent(IntEnum):
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
    UPDATE_POD_SANDBOX = auto()
    POST_UPDATE_POD_SANDBOX = auto()
    VALIDATE_CONTAINER_ADJUSTMENT = auto()

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
    event: NriEvent | None  # None for Synchronize, which is not a subscribable event
    request_type: type[Message]
    response_type: type[Message]
    payload: tuple[str, ...]  # envelope keys taken from the request message, in field order
    reply_keys: frozenset[str]  # reply keys that mean something; others are a violation
    # The changes the response message can carry (`adjust`, `update`, `evict`), read from
    # api.proto: a reply may use exactly these, and the answer is built from them.
    changes: tuple[str, ...]
    # The first NRI version that has the event: a runtime on an older one rejects a plugin
    # that subscribes to it at Configure, and never sends it.
    since: Version

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
# `since`: the first NRI version with the event (docs/protocol.md#what-each-nri-version-added):
# events 1-11 are in every version a runtime ships (v0.3.0 onwards); v0.10.0 added 12-14.
ALWAYS: Version = (0, 0, 0)
_V0_10: Version = (0, 10, 0)
_ROWS: tuple[tuple[EventName, tuple[str, ...], tuple[str, ...], Version], ...] = (
    (EventName.SYNCHRONIZE, ("pods", "containers"), _WARN, ALWAYS),
    (EventName.RUN_POD_SANDBOX, _POD, _WAITED_ON, ALWAYS),
    (EventName.UPDATE_POD_SANDBOX, ("pod", "overhead_linux_resources", "linux_resources"),
     _WAITED_ON, _V0_10),
    (EventName.POST_UPDATE_POD_SANDBOX, _POD, _WARN, _V0_10),
    (EventName.STOP_POD_SANDBOX, _POD, _WARN, ALWAYS),
    (EventName.REMOVE_POD_SANDBOX, _POD, _WARN, ALWAYS),
    (EventName.CREATE_CONTAINER, _CONTAINER, _WAITED_ON, ALWAYS),
    (EventName.POST_CREATE_CONTAINER, _CONTAINER, _WARN, ALWAYS),
    (EventName.START_CONTAINER, _CONTAINER, _WAITED_ON, ALWAYS),
    (EventName.POST_START_CONTAINER, _CONTAINER, _WARN, ALWAYS),
    (EventName.UPDATE_CONTAINER, ("pod", "container", "linux_resources"), _WAITED_ON, ALWAYS),
    (EventName.POST_UPDATE_CONTAINER, _CONTAINER, _WARN, ALWAYS),
    (EventName.STOP_CONTAINER, _CONTAINER, _WAITED_ON, ALWAYS),
    (EventName.REMOVE_CONTAINER, _CONTAINER, _WARN, ALWAYS),
    (EventName.VALIDATE_CONTAINER_ADJUSTMENT,
     ("pod", "container", "adjust", "update", "owners", "plugins"), _WAITED_ON, _V0_10),
)


_CHANGES = ("adjust", "update", "evict")


def _spec(name: EventName, payload: tuple[str, ...], answered: tuple[str, ...],
          since: Version) -> EventSpec:
    # api.proto names every event's messages <RPC name>Request / <RPC name>Response.
    request = getattr(api, f"{name.value}Request")
    response = getattr(api, f"{name.value}Response")
    event = None if name is EventName.SYNCHRONIZE else NriEvent[name.name]
    changes = tuple(f.name for f in response.DESCRIPTOR.fields if f.name in _CHANGES)
    return EventSpec(name, event, request, response, payload,
                     frozenset(changes) | frozenset(answered), changes, since)


CATALOGUE: Mapping[EventName, EventSpec] = MappingProxyType(
    {row[0]: _spec(*row) for row in _ROWS}
)

# --- Views of the catalogue, for the modules that look events up one way. ---

EVENT_NAMES: tuple[str, ...] = tuple(name.value for name in CATALOGUE)
SPEC_OF: Mapping[NriEvent, EventSpec] = MappingProxyType(
    {spec.event: spec for spec in CATALOGUE.values() if spec.event is not None}
)
RPC_NAMES: Mapping[NriEvent, str] = MappingProxyType({e: e.rpc_name for e in NriEvent})
EVENTS_BY_RPC: Mapping[str, NriEvent] = MappingProxyType({e.rpc_name: e for e in NriEvent})
# The request message each event's dedicated RPC carries (StateChange events are turned into
# these too, so handlers see one type per event).
REQUEST_TYPES: Mapping[NriEvent, type[Message]] = MappingProxyType(
    {e: SPEC_OF[e].request_type for e in NriEvent}
)
RESPONSE_TYPES: Mapping[NriEvent, type[Message]] = MappingProxyType(
    {e: SPEC_OF[e].response_type for e in NriEvent}
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
POD_EVENTS: frozenset[NriEvent] = frozenset(
    e for e in NriEvent if SPEC_OF[e].payload[0] == "pod" and "container" not in SPEC_OF[e].payload
)
CONTAINER_EVENTS: frozenset[EventName] = frozenset(
    name for name, spec in CATALOGUE.items() if "container" in spec.payload
)

def known_to(nri: Version | None) -> frozenset[NriEvent]:
    """The events a runtime on NRI `nri` has (the `since` column); an unknown version gets
    only the events every version has."""
    return frozenset(e for e in NriEvent if SPEC_OF[e].since <= (nri or ALWAYS))


def supported_mask(nri: Version | None) -> int:
    """Event bits a runtime on NRI `nri` accepts in ConfigureResponse.events: setting a bit it
    does not know makes it reject the plugin at Configure
    (docs/protocol.md#configure-and-the-event-mask)."""
    return mask_of(known_to(nri))


def mask_of(events: frozenset[NriEvent] | set[NriEvent]) -> int:
    mask = 0
    for event in events:
        mask |= event.bit
    return mask


def events_of(mask: int) -> frozenset[NriEvent]:
    return frozenset(e for e in NriEvent if mask & e.bit)
