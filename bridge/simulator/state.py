"""The simulated runtime's own view of pods and containers.

This is what Synchronize sends and what updates apply to. Lifecycle events
fold into it the way a runtime's store changes: a pod appears at
RunPodSandbox, a container at CreateContainer (as adjusted by the plugins),
changes state at Start/Stop, and disappears at Remove. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from google.protobuf.message import Message

from bridge.contract.catalogue import Event
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.apply import apply_update

M = TypeVar("M", bound=Message)

_STATE_AFTER: dict[Event, api.ContainerState] = {
    Event.CREATE_CONTAINER: api.CONTAINER_CREATED,
    Event.START_CONTAINER: api.CONTAINER_RUNNING,
    Event.STOP_CONTAINER: api.CONTAINER_STOPPED,
}


class RuntimeState:
    """Pods and containers by id (protobuf messages, owned by the state)."""

    def __init__(self) -> None:
        self.pods: dict[str, api.PodSandbox] = {}
        self.containers: dict[str, api.Container] = {}

    def seed(self, pods: Iterable[api.PodSandbox], containers: Iterable[api.Container]) -> None:
        """Add objects as if they existed before the plugin connected."""
        for pod in pods:
            self.pods[pod.id] = _copy(pod)
        for container in containers:
            self.containers[container.id] = _copy(container)

    def snapshot(self) -> tuple[list[api.PodSandbox], list[api.Container]]:
        return list(self.pods.values()), list(self.containers.values())

    def observe(self, event: Event, pod: api.PodSandbox | None,
                container: api.Container | None) -> None:
        """Fold a successfully completed lifecycle event into the state."""
        if event is Event.REMOVE_POD_SANDBOX:
            if pod is not None:
                self.pods.pop(pod.id, None)
            return
        if event is Event.REMOVE_CONTAINER:
            if container is not None:
                self.containers.pop(container.id, None)
            return
        if pod is not None and pod.id and (event is Event.RUN_POD_SANDBOX or pod.id in self.pods):
            self.pods[pod.id] = _copy(pod)
        if container is None or not container.id:
            return
        current = self.containers.get(container.id)
        if event is Event.CREATE_CONTAINER or current is None:
            current = self.containers[container.id] = _copy(container)
        state = _STATE_AFTER.get(event)
        if state is not None:
            current.state = state

    def apply_update(self, update: api.ContainerUpdate) -> bool:
        """Apply one update; False if the container is unknown or cannot be updated."""
        container = self.containers.get(update.container_id)
        if container is None:
            return False
        if container.state == api.CONTAINER_STOPPED:
            return False  # a stopped container's resources cannot change any more
        apply_update(container, update)
        return True


def _copy(msg: M) -> M:
    copy = type(msg)()
    copy.CopyFrom(msg)
    return copy
