"""NRI events, their subscription bits, and how each one reaches a plugin.

Event value e sets bit 1 << (e - 1) in ConfigureResponse.events (protocol §4.3).
The RPC names double as the event names used in logs and in the webhook JSON.
"""

from __future__ import annotations

from enum import IntEnum

from google.protobuf.message import Message

from bridge.proto.nri import api_pb2 as api


class Event(IntEnum):
    RUN_POD_SANDBOX = 1
    STOP_POD_SANDBOX = 2
    REMOVE_POD_SANDBOX = 3
    CREATE_CONTAINER = 4
    POST_CREATE_CONTAINER = 5
    START_CONTAINER = 6
    POST_START_CONTAINER = 7
    UPDATE_CONTAINER = 8
    POST_UPDATE_CONTAINER = 9
    STOP_CONTAINER = 10
    REMOVE_CONTAINER = 11
    UPDATE_POD_SANDBOX = 12  # NRI v0.10.0+
    POST_UPDATE_POD_SANDBOX = 13  # NRI v0.10.0+
    VALIDATE_CONTAINER_ADJUSTMENT = 14  # NRI v0.10.0+

    @property
    def bit(self) -> int:
        return 1 << (self.value - 1)

    @property
    def rpc_name(self) -> str:
        return RPC_NAMES[self]


RPC_NAMES: dict[Event, str] = {
    Event.RUN_POD_SANDBOX: "RunPodSandbox",
    Event.STOP_POD_SANDBOX: "StopPodSandbox",
    Event.REMOVE_POD_SANDBOX: "RemovePodSandbox",
    Event.CREATE_CONTAINER: "CreateContainer",
    Event.POST_CREATE_CONTAINER: "PostCreateContainer",
    Event.START_CONTAINER: "StartContainer",
    Event.POST_START_CONTAINER: "PostStartContainer",
    Event.UPDATE_CONTAINER: "UpdateContainer",
    Event.POST_UPDATE_CONTAINER: "PostUpdateContainer",
    Event.STOP_CONTAINER: "StopContainer",
    Event.REMOVE_CONTAINER: "RemoveContainer",
    Event.UPDATE_POD_SANDBOX: "UpdatePodSandbox",
    Event.POST_UPDATE_POD_SANDBOX: "PostUpdatePodSandbox",
    Event.VALIDATE_CONTAINER_ADJUSTMENT: "ValidateContainerAdjustment",
}
EVENTS_BY_RPC: dict[str, Event] = {name: event for event, name in RPC_NAMES.items()}

POD_EVENTS = frozenset({
    Event.RUN_POD_SANDBOX, Event.STOP_POD_SANDBOX, Event.REMOVE_POD_SANDBOX,
    Event.UPDATE_POD_SANDBOX, Event.POST_UPDATE_POD_SANDBOX,
})

# Events a runtime at or below NRI v0.9.x knows (LAST = 12): mask 0x07FF.
# v0.10.0 added events 12-14 (LAST = 15): mask 0x3FFF. Setting an unknown bit
# makes the runtime reject the plugin at Configure.
MASK_BEFORE_V0_10 = (1 << (12 - 1)) - 1
MASK_FROM_V0_10 = (1 << (15 - 1)) - 1


def mask_of(events: frozenset[Event] | set[Event]) -> int:
    mask = 0
    for event in events:
        mask |= event.bit
    return mask


def events_of(mask: int) -> frozenset[Event]:
    return frozenset(e for e in Event if mask & e.bit)


# The request message each event's dedicated RPC carries (StateChange events are
# turned into these too, so handlers see one type per event).
REQUEST_TYPES: dict[Event, type[Message]] = {
    Event.RUN_POD_SANDBOX: api.RunPodSandboxRequest,
    Event.STOP_POD_SANDBOX: api.StopPodSandboxRequest,
    Event.REMOVE_POD_SANDBOX: api.RemovePodSandboxRequest,
    Event.CREATE_CONTAINER: api.CreateContainerRequest,
    Event.POST_CREATE_CONTAINER: api.PostCreateContainerRequest,
    Event.START_CONTAINER: api.StartContainerRequest,
    Event.POST_START_CONTAINER: api.PostStartContainerRequest,
    Event.UPDATE_CONTAINER: api.UpdateContainerRequest,
    Event.POST_UPDATE_CONTAINER: api.PostUpdateContainerRequest,
    Event.STOP_CONTAINER: api.StopContainerRequest,
    Event.REMOVE_CONTAINER: api.RemoveContainerRequest,
    Event.UPDATE_POD_SANDBOX: api.UpdatePodSandboxRequest,
    Event.POST_UPDATE_POD_SANDBOX: api.PostUpdatePodSandboxRequest,
    Event.VALIDATE_CONTAINER_ADJUSTMENT: api.ValidateContainerAdjustmentRequest,
}
