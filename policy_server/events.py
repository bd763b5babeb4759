"""NRI event names as they appear in the webhook envelope's ``event`` key.

Owns the closed set of event names and which reply parts each event can carry. Must not know
anything about HTTP or about particular policies.
"""

from __future__ import annotations

from enum import StrEnum


class EventName(StrEnum):
    """One NRI lifecycle event, spelled exactly as the bridge sends it."""

    SYNCHRONIZE = "Synchronize"
    RUN_POD_SANDBOX = "RunPodSandbox"
    UPDATE_POD_SANDBOX = "UpdatePodSandbox"
    POST_UPDATE_POD_SANDBOX = "PostUpdatePodSandbox"
    STOP_POD_SANDBOX = "StopPodSandbox"
    REMOVE_POD_SANDBOX = "RemovePodSandbox"
    CREATE_CONTAINER = "CreateContainer"
    POST_CREATE_CONTAINER = "PostCreateContainer"
    START_CONTAINER = "StartContainer"
    POST_START_CONTAINER = "PostStartContainer"
    UPDATE_CONTAINER = "UpdateContainer"
    POST_UPDATE_CONTAINER = "PostUpdateContainer"
    STOP_CONTAINER = "StopContainer"
    REMOVE_CONTAINER = "RemoveContainer"
    VALIDATE_CONTAINER_ADJUSTMENT = "ValidateContainerAdjustment"


# Which reply keys mean something for each event (the contract's per-event reply table, from
# the NRI response messages): only CreateContainerResponse carries a ContainerAdjustment;
# Create/Update/Stop container and Synchronize carry ContainerUpdates; Create/Update carry
# evictions; a rejection can fail only the operations the runtime waits for. Post-events and
# removals cannot change or fail anything.
_WAITED_ON = ("reject", "warnings")
REPLY_KEYS: dict[EventName, frozenset[str]] = {
    event: frozenset({"warnings"}) for event in EventName
} | {
    EventName.CREATE_CONTAINER: frozenset({"adjust", "update", "evict", *_WAITED_ON}),
    EventName.UPDATE_CONTAINER: frozenset({"update", "evict", *_WAITED_ON}),
    EventName.STOP_CONTAINER: frozenset({"update", *_WAITED_ON}),
    EventName.SYNCHRONIZE: frozenset({"update", "warnings"}),
    EventName.RUN_POD_SANDBOX: frozenset(_WAITED_ON),
    EventName.UPDATE_POD_SANDBOX: frozenset(_WAITED_ON),
    EventName.START_CONTAINER: frozenset(_WAITED_ON),
    EventName.VALIDATE_CONTAINER_ADJUSTMENT: frozenset(_WAITED_ON),
}

# Events whose payload has a ``container`` object (all container-scoped events).
CONTAINER_EVENTS = frozenset(
    {
        EventName.CREATE_CONTAINER,
        EventName.POST_CREATE_CONTAINER,
        EventName.START_CONTAINER,
        EventName.POST_START_CONTAINER,
        EventName.UPDATE_CONTAINER,
        EventName.POST_UPDATE_CONTAINER,
        EventName.STOP_CONTAINER,
        EventName.REMOVE_CONTAINER,
        EventName.VALIDATE_CONTAINER_ADJUSTMENT,
    }
)
