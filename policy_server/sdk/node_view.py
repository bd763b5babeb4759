"""The node as the runtime reports it: pods and containers, kept current from the events.

Owns ``NodeState`` (the engine folds every request into it while some policy reads the view:
Synchronize replaces the whole view, lifecycle events add, change and remove entries) and
``NodeView``, the read-only face handlers and observers get, so a stateful policy does not have
to track pods and containers itself. The view also carries the server's ``NodeFacts`` about the
host (its cgroup version and files).

The view is only as complete as the events the bridge sends to this server: a webhook that wants
it current subscribes to Synchronize and to the create/stop/remove events. It shows what the
runtime reported, not what a policy answered (an adjustment appears once a later event reports
the container again). The fold itself — what each event changes, and the bound — is the one the
bridge's state cache uses (bridge.node_tables.fold). ``snapshot``/``restore`` let the engine keep
a dry-run copy apart from the real view. Must not do I/O or know policies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from bridge.contract.catalogue import EventName
from bridge.node_tables.fold import CREATED, MAX_OBJECTS, RUNNING, STOPPED, NodeTables
from policy_server.sdk.model import Container, Event, Pod
from policy_server.sdk.node_facts import UNKNOWN_NODE, NodeFacts

__all__ = [
    "CREATED",
    "MAX_OBJECTS",
    "RUNNING",
    "STOPPED",
    "NodeSnapshot",
    "NodeState",
    "NodeView",
]


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
    def facts(self) -> NodeFacts:
        """What the server found out about the host at start-up (e.g. its cgroup version)."""
        return self._state.facts

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


def _state_of(container: Container) -> str:
    return container.state


def _with_state(container: Container, state: str) -> Container:
    return replace(container, state=state)


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """The view's content at one moment (the engine's dry-run bookkeeping)."""

    pods: Mapping[str, Pod]
    containers: Mapping[str, Container]
    adopted: frozenset[str]  # pods known without their RunPodSandbox (node_fold)
    synced: bool


class NodeState:
    """The mutable store behind ``NodeView``; only the engine calls ``apply``."""

    def __init__(self, facts: NodeFacts = UNKNOWN_NODE) -> None:
        self.facts = facts
        self._tables: NodeTables[Pod, Container] = NodeTables("node view", _state_of, _with_state)
        self.pods: dict[str, Pod] = self._tables.pods
        self.containers: dict[str, Container] = self._tables.containers
        self.pods_view: Mapping[str, Pod] = MappingProxyType(self.pods)
        self.containers_view: Mapping[str, Container] = MappingProxyType(self.containers)
        self.synced = False
        self.generation = 0
        self.view = NodeView(self)

    def snapshot(self) -> NodeSnapshot:
        return NodeSnapshot(
            dict(self.pods), dict(self.containers), self._tables.adopted, self.synced
        )

    def restore(self, snapshot: NodeSnapshot) -> None:
        """Back to ``snapshot``, in place (the views stay valid). The generation still moves
        on: whatever a policy derived from the view before may be stale now."""
        self._tables.restore(snapshot.pods, snapshot.containers, snapshot.adopted)
        self.synced = snapshot.synced
        self.generation += 1

    def apply(self, event: Event) -> None:
        """Fold one request into the view (idempotent: several policies may see one event)."""
        self.generation += 1
        if event.name is EventName.SYNCHRONIZE:
            self._tables.reset(event.pods, event.containers)
            self.synced = True
            return
        self._tables.fold(event.name, event.pod, event.container)
