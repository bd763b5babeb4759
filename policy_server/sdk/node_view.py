"""The node as the runtime reports it: pods and containers, kept current from the events.

Owns ``NodeState`` (the engine folds every request into it: Synchronize replaces the whole view,
lifecycle events add, change and remove entries) and ``NodeView``, the read-only face handlers
and observers get, so a stateful policy does not have to track pods and containers itself.

The view is only as complete as the events the bridge sends to this server: a webhook that wants
it current subscribes to Synchronize and to the create/stop/remove events. It shows what the
runtime reported, not what a policy answered (an adjustment appears once a later event reports
the container again). Bounded like the bridge's own cache. Must not do I/O or know policies.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TypeVar

from bridge.contract.catalogue import EventName
from policy_server.sdk.model import Container, Event, Pod

log = logging.getLogger(__name__)

MAX_OBJECTS = 100_000
T = TypeVar("T")

CREATED = "CONTAINER_CREATED"
RUNNING = "CONTAINER_RUNNING"
STOPPED = "CONTAINER_STOPPED"

# The state a container is in once the event has happened (the runtime reports the state it
# had when it sent the request, e.g. CONTAINER_UNKNOWN at CreateContainer).
_STATE_AFTER: Mapping[EventName, str] = {
    EventName.CREATE_CONTAINER: CREATED,
    EventName.POST_CREATE_CONTAINER: CREATED,
    EventName.START_CONTAINER: RUNNING,
    EventName.POST_START_CONTAINER: RUNNING,
    EventName.STOP_CONTAINER: STOPPED,
}


class NodeView:
    """Read-only access to a ``NodeState``; valid during the handler call it was passed to."""

    __slots__ = ("_state",)

    def __init__(self, state: NodeState) -> None:
        self._state = state

    @property
    def pods(self) -> Mapping[str, Pod]:
        """Pod sandboxes by id."""
        return self._state.pods_view

    @property
    def containers(self) -> Mapping[str, Container]:
        """Containers by id, in the order the runtime first reported them."""
        return self._state.containers_view

    @property
    def synced(self) -> bool:
        """True once a Synchronize has been seen: before that the view may miss containers."""
        return self._state.synced

    @property
    def generation(self) -> int:
        """Counts the events folded in; a change means the view may have changed."""
        return self._state.generation

    def pod_of(self, container: Container) -> Pod | None:
        return self._state.pods.get(container.pod_sandbox_id)

    def containers_of(self, pod_id: str) -> tuple[Container, ...]:
        return tuple(c for c in self._state.containers.values() if c.pod_sandbox_id == pod_id)

    def live_containers(self) -> tuple[Container, ...]:
        """Containers that are not stopped (those an update can still change)."""
        return tuple(c for c in self._state.containers.values() if c.state != STOPPED)


class NodeState:
    """The mutable store behind ``NodeView``; only the engine calls ``apply``."""

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}
        self.containers: dict[str, Container] = {}
        self.pods_view: Mapping[str, Pod] = MappingProxyType(self.pods)
        self.containers_view: Mapping[str, Container] = MappingProxyType(self.containers)
        self.synced = False
        self.generation = 0
        self.view = NodeView(self)

    def apply(self, event: Event) -> None:
        """Fold one request into the view (idempotent: several policies may see one event)."""
        self.generation += 1
        name = event.name
        if name is EventName.SYNCHRONIZE:
            self._reset(event.pods, event.containers)
            return
        pod, container = event.pod, event.container
        if name is EventName.REMOVE_POD_SANDBOX and pod is not None:
            self.pods.pop(pod.id, None)
            for gone in [c.id for c in self.containers.values() if c.pod_sandbox_id == pod.id]:
                del self.containers[gone]
            return
        if name is EventName.REMOVE_CONTAINER and container is not None:
            self.containers.pop(container.id, None)
            return
        if pod is not None and pod.id:
            self._put(self.pods, pod.id, pod)
        if container is not None and container.id:
            state = _STATE_AFTER.get(name)
            if state is not None and container.state != state:
                container = replace(container, state=state)
            self._put(self.containers, container.id, container)

    def _reset(self, pods: tuple[Pod, ...], containers: tuple[Container, ...]) -> None:
        self.pods.clear()
        self.containers.clear()
        self.pods.update((p.id, p) for p in pods[:MAX_OBJECTS])
        self.containers.update((c.id, c) for c in containers[:MAX_OBJECTS])
        if len(pods) > MAX_OBJECTS or len(containers) > MAX_OBJECTS:
            log.warning("node view full: keeping the first %d pods and containers", MAX_OBJECTS)
        self.synced = True

    @staticmethod
    def _put(
        table: dict[str, Pod] | dict[str, Container], key: str, value: Pod | Container
    ) -> None:
        if key not in table and len(table) >= MAX_OBJECTS:
            log.warning("node view full (%d objects); not tracking %s", MAX_OBJECTS, key)
            return
        table[key] = value  # type: ignore[assignment]
