"""The one pod/container fold over NRI protobuf messages: what the bridge's state cache and the
simulated runtime's store keep.

Owns: how a `Container` message's state is named for the fold (bridge.node_tables.fold works
on names such as ``CONTAINER_RUNNING``, which is what the envelope carries and the policy
server's NodeView holds), how a message takes a new state, and the name the fold knows an
`NriEvent` by. Two owners, two ways to take a state: the bridge's cache gets the request's
container, which the handler still reads, so it stores a copy; the simulated runtime always
passes its own copy, so it changes that one in place. Must not: do I/O, or decide what an
event changes (that is bridge.node_tables.fold's).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import cast

from bridge.contract.catalogue import EventName, NriEvent
from bridge.node_tables.fold import MAX_OBJECTS, NodeTables
from bridge.proto.nri import api_pb2 as api

MessageTables = NodeTables[api.PodSandbox, api.Container]

# NriEvent -> its name as the fold knows it (the envelope's spelling).
FOLD_NAMES: Mapping[NriEvent, EventName] = MappingProxyType(
    {event: EventName[event.name] for event in NriEvent})

UNBOUNDED = sys.maxsize


def state_name(container: api.Container) -> str:
    try:
        return api.ContainerState.Name(container.state)
    except ValueError:  # a state newer than our api.proto
        return str(container.state)


def _state_value(state: str) -> api.ContainerState:
    return cast(api.ContainerState, api.ContainerState.Value(state))


def with_state(container: api.Container, state: str) -> api.Container:
    """A copy of `container` in `state` (the one passed in is left alone)."""
    copy = api.Container()
    copy.CopyFrom(container)
    copy.state = _state_value(state)
    return copy


def set_state(container: api.Container, state: str) -> api.Container:
    """`container` itself, now in `state` (for a table that owns what it is given)."""
    container.state = _state_value(state)
    return container


def message_tables(what: str, *, owns_what_it_gets: bool = False,
                   max_objects: int = MAX_OBJECTS) -> MessageTables:
    """Tables of protobuf pods and containers folded by bridge.node_tables.fold.
    `owns_what_it_gets`: every container passed to `fold` is the caller's own copy, so a state
    change needs no copy."""
    return NodeTables(what, state_name, set_state if owns_what_it_gets else with_state,
                      max_objects)
