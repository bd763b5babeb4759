"""Pods and containers kept current from NRI events: the one fold both products use.

Owns: how a lifecycle event changes a node's pods and containers — Synchronize replaces them;
a pod or container in an event's request is added or replaced, a container with the state the
event implies (the runtime reports the state it had when it sent the request, e.g.
CONTAINER_UNKNOWN at CreateContainer); RemoveContainer drops the container; RemovePodSandbox
drops the pod *and every container still recorded for it* (no container outlives its
sandbox; kept, a container whose RemoveContainer was missed would be a target for updates
forever and fill the table); a pod the tables did not learn of from its RunPodSandbox (listed by
a Synchronize, or first seen in a container's event) goes with its last container, because the
runtime may never send its StopPodSandbox or RemovePodSandbox (containerd 2.1.9 sends neither
for a sandbox that existed before it restarted: docs/operations.md, runtime restart; a later
event for the pod adds it back) — and the bound on both tables. The bridge's state cache
(bridge.nri.cache) and the simulated runtime's store (bridge.simulator.state), protobuf
messages through bridge.node_tables.messages, and the policy server's NodeView
(policy_server.sdk.node_view, the SDK's frozen dataclasses) all fold through `NodeTables`.
Must not: do I/O, or know what a pod or container is beyond its id, pod id and state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

from bridge.contract.catalogue import EventName

log = logging.getLogger(__name__)

MAX_OBJECTS = 100_000

CREATED = "CONTAINER_CREATED"
RUNNING = "CONTAINER_RUNNING"
STOPPED = "CONTAINER_STOPPED"

# The state a container is in once the event has happened.
STATE_AFTER: Mapping[EventName, str] = MappingProxyType({
    EventName.CREATE_CONTAINER: CREATED,
    EventName.POST_CREATE_CONTAINER: CREATED,
    EventName.START_CONTAINER: RUNNING,
    EventName.POST_START_CONTAINER: RUNNING,
    EventName.STOP_CONTAINER: STOPPED,
})


class PodLike(Protocol):
    @property
    def id(self) -> str: ...


class ContainerLike(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def pod_sandbox_id(self) -> str: ...


P = TypeVar("P", bound=PodLike)
C = TypeVar("C", bound=ContainerLike)
T = TypeVar("T")


class NodeTables(Generic[P, C]):
    """Pods and containers by id (dicts changed in place, so read-only views of them stay
    valid), at most `max_objects` of each.

    `state_of(container)` names a container's state (``CONTAINER_RUNNING``);
    `with_state(container, name)` is the container in that state, without changing the one
    the event carried (the handler still reads it)."""

    def __init__(self, what: str, state_of: Callable[[C], str],
                 with_state: Callable[[C, str], C], max_objects: int = MAX_OBJECTS) -> None:
        self.what = what  # for the "full" warning: "state cache", "node view"
        self.pods: dict[str, P] = {}
        self.containers: dict[str, C] = {}
        self._state_of = state_of
        self._with_state = with_state
        self._max = max_objects
        # Pods whose RunPodSandbox these tables did not see: no pod event is promised for them.
        self._adopted: set[str] = set()

    def reset(self, pods: Iterable[P], containers: Iterable[C]) -> None:
        """Synchronize: the runtime's whole state replaces the tables."""
        self.clear()
        self.pods.update(self._bounded((p.id, p) for p in pods))
        self.containers.update(self._bounded((c.id, c) for c in containers))
        self._adopted.update(self.pods)

    def clear(self) -> None:
        self.pods.clear()
        self.containers.clear()
        self._adopted.clear()

    @property
    def adopted(self) -> frozenset[str]:
        """The pods whose RunPodSandbox these tables did not see (for a snapshot)."""
        return frozenset(self._adopted)

    def restore(self, pods: Mapping[str, P], containers: Mapping[str, C],
                adopted: Iterable[str]) -> None:
        """Back to a snapshot of these tables (``pods``, ``containers``, ``adopted``), in place."""
        self.clear()
        self.pods.update(pods)
        self.containers.update(containers)
        self._adopted.update(adopted)

    def fold(self, event: EventName, pod: P | None, container: C | None) -> None:
        """One lifecycle event, with the pod and container its request carries."""
        if event is EventName.REMOVE_POD_SANDBOX and pod is not None:
            self.pods.pop(pod.id, None)
            self._adopted.discard(pod.id)
            orphans = [c.id for c in self.containers.values() if c.pod_sandbox_id == pod.id]
            for gone in orphans:
                del self.containers[gone]
            return
        if event is EventName.REMOVE_CONTAINER and container is not None:
            self.containers.pop(container.id, None)
            self._forget_if_empty(container.pod_sandbox_id)
            return
        if pod is not None and pod.id:
            if event is EventName.RUN_POD_SANDBOX:
                self._adopted.discard(pod.id)
            elif pod.id not in self.pods:
                self._adopted.add(pod.id)
            self._put(self.pods, pod.id, pod)
        if container is not None and container.id:
            state = STATE_AFTER.get(event)
            if state is not None and self._state_of(container) != state:
                container = self._with_state(container, state)
            self._put(self.containers, container.id, container)

    def _forget_if_empty(self, pod_id: str) -> None:
        """An adopted pod leaves with its last container (see the module docstring)."""
        if pod_id not in self._adopted:
            return
        if any(c.pod_sandbox_id == pod_id for c in self.containers.values()):
            return
        self._adopted.discard(pod_id)
        if self.pods.pop(pod_id, None) is not None:
            log.debug("%s: pod %s left with its last container (no pod events are promised "
                      "for a pod known from a Synchronize)", self.what, pod_id)

    def _bounded(self, items: Iterable[tuple[str, T]]) -> Iterable[tuple[str, T]]:
        for count, item in enumerate(items):
            if count >= self._max:
                log.warning("%s full: keeping the first %d pods and containers", self.what,
                            self._max)
                return
            yield item

    def _put(self, table: dict[str, T], key: str, value: T) -> None:
        if key not in table and len(table) >= self._max:
            log.warning("%s full (%d objects); not tracking %s", self.what, self._max, key)
            return
        table[key] = value
