"""The simulated runtime's own pods and containers: the store Synchronize sends.

The table is the one every part folds events into (bridge.node_tables.fold, over protobuf
messages by bridge.node_tables.messages: the bridge's state cache and the policy server's
NodeView use it too); this module owns what the runtime feeds it. The runtime is the source of
truth, not an observer, so: a pod exists from its RunPodSandbox (or from being seeded before the
plugin connected) until its RemovePodSandbox, never because an event names it, and no pod is
"adopted" (forgotten with its last container, as an observer must); a container is stored as
CreateContainer made it (adjusted by the plugins), and later events change only its state,
because the stored container, with every update applied, is the runtime's whatever the event's
request carried; RemovePodSandbox takes the pod's remaining containers with it. The runtime keeps
its own copies of the messages and has no bound of its own. An update is applied as the runtime
applies one by its route (bridge.contract.runtime_effects: a plugin's UpdateContainers and the
updates of other containers in a reply by default). Sans-IO.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from google.protobuf.message import Message

from bridge.contract.catalogue import NriEvent
from bridge.contract.runtime_effects import Route, Runtime
from bridge.node_tables.messages import FOLD_NAMES, UNBOUNDED, message_tables
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.apply import apply_update

M = TypeVar("M", bound=Message)


class RuntimeState:
    """Pods and containers by id (protobuf messages, owned by the state)."""

    def __init__(self, runtime: Runtime | None = None) -> None:
        self.runtime = runtime  # None: apply every leaf an update sets
        self._tables = message_tables("simulated runtime", owns_what_it_gets=True,
                                      max_objects=UNBOUNDED)

    @property
    def pods(self) -> dict[str, api.PodSandbox]:
        return self._tables.pods

    @property
    def containers(self) -> dict[str, api.Container]:
        return self._tables.containers

    def seed(self, pods: Iterable[api.PodSandbox], containers: Iterable[api.Container]) -> None:
        """Add objects as if they existed before the plugin connected."""
        self._tables.restore({**self.pods, **{p.id: _copy(p) for p in pods}},
                             {**self.containers, **{c.id: _copy(c) for c in containers}},
                             adopted=())

    def snapshot(self) -> tuple[list[api.PodSandbox], list[api.Container]]:
        return list(self.pods.values()), list(self.containers.values())

    def observe(self, event: NriEvent, pod: api.PodSandbox | None,
                container: api.Container | None) -> None:
        """Fold a successfully completed lifecycle event into the state."""
        if pod is not None and pod.id not in self.pods and event not in (
                NriEvent.RUN_POD_SANDBOX, NriEvent.REMOVE_POD_SANDBOX):
            pod = None  # an event does not create the pod it names
        if container is not None and container.id:
            current = self.containers.get(container.id)
            container = (current if current is not None and event is not NriEvent.CREATE_CONTAINER
                         else _copy(container))
        self._tables.fold(FOLD_NAMES[event], None if pod is None else _copy(pod), container)

    def apply_update(self, update: api.ContainerUpdate,
                     route: Route | None = Route.UPDATE_CONTAINERS) -> bool:
        """Apply one update as the runtime does by `route` (None: resources the runtime has
        already decided on, applied as they are); False if the container is unknown or cannot
        be updated."""
        container = self.containers.get(update.container_id)
        if container is None:
            return False
        if container.state == api.CONTAINER_STOPPED:
            return False  # a stopped container's resources cannot change any more
        apply_update(container, update, None if route is None else self.runtime,
                     route or Route.UPDATE)
        return True


    def apply_reply_update(self, update: api.ContainerUpdate) -> bool:
        """Apply an update from an event's reply (it passed NRI's merge: Route.UPDATE)."""
        return self.apply_update(update, Route.UPDATE)


def _copy(msg: M) -> M:
    copy = type(msg)()
    copy.CopyFrom(msg)
    return copy
