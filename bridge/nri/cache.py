"""The bridge's view of pods and containers, kept current from Synchronize and events.

Synchronize replaces the whole view; lifecycle events add, update and remove
entries. The view is bounded so a hostile runtime cannot grow it without limit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

from google.protobuf.message import Message

from bridge.contract.catalogue import Event, updates_in
from bridge.contract.codec import request_subjects
from bridge.proto.nri import api_pb2 as api

log = logging.getLogger(__name__)

MAX_OBJECTS = 100_000
T = TypeVar("T", api.PodSandbox, api.Container)

_STATE_AFTER: dict[Event, api.ContainerState] = {
    Event.CREATE_CONTAINER: api.CONTAINER_CREATED,
    Event.POST_CREATE_CONTAINER: api.CONTAINER_CREATED,
    Event.START_CONTAINER: api.CONTAINER_RUNNING,
    Event.POST_START_CONTAINER: api.CONTAINER_RUNNING,
    Event.STOP_CONTAINER: api.CONTAINER_STOPPED,
}


class StateCache:
    def __init__(self) -> None:
        self.pods: dict[str, api.PodSandbox] = {}
        self.containers: dict[str, api.Container] = {}

    def reset(self, pods: list[api.PodSandbox], containers: list[api.Container]) -> None:
        self.pods = {p.id: p for p in pods[:MAX_OBJECTS]}
        self.containers = {c.id: c for c in containers[:MAX_OBJECTS]}

    def clear(self) -> None:
        self.pods.clear()
        self.containers.clear()

    def knows_container(self, container_id: str) -> bool:
        return container_id in self.containers

    def observe_request(self, event: Event, req: Message | None) -> None:
        """Fold one lifecycle event into the view, from its request message."""
        self.observe(event, *request_subjects(req))

    def observe(self, event: Event, pod: api.PodSandbox | None,
                container: api.Container | None) -> None:
        """Fold one lifecycle event into the view."""
        if event is Event.REMOVE_POD_SANDBOX and pod is not None:
            self.pods.pop(pod.id, None)
            return
        if event is Event.REMOVE_CONTAINER and container is not None:
            self.containers.pop(container.id, None)
            return
        if pod is not None and pod.id:
            self._put(self.pods, pod.id, pod)
        if container is not None and container.id:
            state = _STATE_AFTER.get(event)
            if state is not None and container.state != state:
                # Record the state the event implies without touching the
                # request object the handler is about to see.
                incoming = container
                container = api.Container()
                container.CopyFrom(incoming)
                container.state = state
            self._put(self.containers, container.id, container)

    def apply_answer(self, event: Event, req: Message | None,
                     response: Message | None) -> None:
        """Fold what we answered into the view, so it shows effective resources.

        CreateContainer: our adjustment's resources merge into the new
        container. UpdateContainer: the requested resources, with our update for
        that container merged on top, become its resources. Updates for other
        containers merge into theirs (the runtime applies them the same way).
        """
        if (isinstance(req, api.CreateContainerRequest)
                and isinstance(response, api.CreateContainerResponse)
                and response.HasField("adjust")):
            created = self.containers.get(req.container.id)
            if created is not None and response.adjust.linux.HasField("resources"):
                created.linux.resources.MergeFrom(response.adjust.linux.resources)
        if isinstance(req, api.UpdateContainerRequest):
            target = self.containers.get(req.container.id)
            if target is not None:
                target.linux.resources.CopyFrom(req.linux_resources)
        self.apply_updates(updates_in(response))

    def apply_updates(self, updates: Sequence[api.ContainerUpdate]) -> None:
        """Record unsolicited or Synchronize updates the runtime accepted."""
        for update in updates:
            current = self.containers.get(update.container_id)
            if current is not None and update.linux.HasField("resources"):
                current.linux.resources.MergeFrom(update.linux.resources)

    @staticmethod
    def _put(table: dict[str, T], key: str, value: T) -> None:
        if key not in table and len(table) >= MAX_OBJECTS:
            log.warning("state cache full (%d objects); not tracking %s", MAX_OBJECTS, key)
            return
        table[key] = value

