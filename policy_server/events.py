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


# Which reply parts the runtime can act on, per event (NRI api.proto response messages):
# only CreateContainerResponse carries a ContainerAdjustment; Create/Update/Stop container and
# Synchronize responses carry ContainerUpdates; Create/Update container responses carry evictions.
ADJUST_EVENTS = frozenset({EventName.CREATE_CONTAINER})
UPDATE_EVENTS = frozenset(
    {
        EventName.CREATE_CONTAINER,
        EventName.UPDATE_CONTAINER,
        EventName.STOP_CONTAINER,
        EventName.SYNCHRONIZE,
    }
)
EVICT_EVENTS = frozenset({EventName.CREATE_CONTAINER, EventName.UPDATE_CONTAINER})

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
