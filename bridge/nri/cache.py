"""The bridge's view of pods and containers, kept current from Synchronize and events.

Synchronize replaces the whole view; lifecycle events add, update and remove entries, by the
fold the policy server's NodeView and the simulated runtime use too (bridge.node_tables.fold,
over protobuf messages by bridge.node_tables.messages; bounded so a hostile runtime cannot
grow it without limit). On top of it, the cache folds in what the bridge
answered (our adjustments and updates), so the view shows effective resources: laid over the
container's resources by the runtime's own rule (bridge.contract.resource_overlay: set scalars
replace, hugepage limits per page size, unified per key, device rules appended), never
protobuf's MergeFrom, which would append a second hugepage limit of the same page size.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf.message import Message

from bridge.contract.catalogue import NriEvent, updates_in
from bridge.contract.codec import request_subjects
from bridge.contract.resource_overlay import overlay_resources
from bridge.node_tables.messages import FOLD_NAMES, message_tables
from bridge.proto.nri import api_pb2 as api


class StateCache:
    def __init__(self) -> None:
        # The request's container is still read by the handler: a state change is a copy.
        self._tables = message_tables("state cache")

    @property
    def pods(self) -> dict[str, api.PodSandbox]:
        return self._tables.pods

    @property
    def containers(self) -> dict[str, api.Container]:
        return self._tables.containers

    def reset(self, pods: list[api.PodSandbox], containers: list[api.Container]) -> None:
        self._tables.reset(pods, containers)

    def clear(self) -> None:
        self._tables.clear()

    def knows_container(self, container_id: str) -> bool:
        return container_id in self._tables.containers

    def lookup(self, container_id: str) -> tuple[api.Container, api.PodSandbox | None] | None:
        """A container and its pod (None if the pod is not known), or None: what the reply
        guard binds a webhook's update and eviction targets with."""
        container = self._tables.containers.get(container_id)
        if container is None:
            return None
        return container, self._tables.pods.get(container.pod_sandbox_id)

    def observe_request(self, event: NriEvent, req: Message | None) -> None:
        """Fold one lifecycle event into the view, from its request message."""
        self.observe(event, *request_subjects(req))

    def observe(self, event: NriEvent, pod: api.PodSandbox | None,
                container: api.Container | None) -> None:
        """Fold one lifecycle event into the view (bridge.node_tables.fold)."""
        self._tables.fold(FOLD_NAMES[event], pod, container)

    def apply_answer(self, event: NriEvent, req: Message | None,
                     response: Message | None) -> None:
        """Fold what we answered into the view, so it shows effective resources.

        CreateContainer: our adjustment's resources are laid over the new
        container's. UpdateContainer: the requested resources are laid over the
        container's (containerd applies CRI UpdateContainerResources onto the spec
        it has: what the request does not carry, device rules say, stays), then our
        update for that container. Updates for other containers are laid over
        theirs (the runtime applies them the same way).
        """
        if (isinstance(req, api.CreateContainerRequest)
                and isinstance(response, api.CreateContainerResponse)
                and response.HasField("adjust")):
            created = self.containers.get(req.container.id)
            if created is not None and response.adjust.linux.HasField("resources"):
                overlay_resources(created.linux.resources, response.adjust.linux.resources)
        if isinstance(req, api.UpdateContainerRequest):
            target = self.containers.get(req.container.id)
            if target is not None:
                overlay_resources(target.linux.resources, req.linux_resources)
        self.apply_updates(updates_in(response))

    def apply_updates(self, updates: Sequence[api.ContainerUpdate]) -> None:
        """Record unsolicited or Synchronize updates the runtime accepted."""
        for update in updates:
            current = self.containers.get(update.container_id)
            if current is not None and update.linux.HasField("resources"):
                overlay_resources(current.linux.resources, update.linux.resources)
