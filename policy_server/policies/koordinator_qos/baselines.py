"""Unscaled CFS quotas per container, remembered so CPU normalization can be recomputed.

koordlet recomputes a running container's quota from the pod spec; NRI does not carry the pod
spec, and a running container's quota may already be scaled. So the policy observes the quota
kubelet asked for at CreateContainer/UpdateContainer and reconciles from that. In-memory only
(a restarted server relearns as containers are created or updated); bounded; no I/O. Registered
with ``Policy.state``, so dry runs learn into the engine's dry-run copy only.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import cast

from policy_server.sdk import Event, EventName

MAX_CONTAINERS = 65_536


class QuotaBaselines:
    """container id -> the quota kubelet requested (before any normalization)."""

    def __init__(self, max_containers: int = MAX_CONTAINERS) -> None:
        self._quota: dict[str, int] = {}
        self._max = max_containers
        self._view = MappingProxyType(self._quota)

    def snapshot(self) -> object:
        return dict(self._quota)

    def restore(self, snapshot: object) -> None:
        """In place: the read-only view handed out stays valid."""
        self._quota.clear()
        self._quota.update(cast(dict[str, int], snapshot))

    def view(self) -> Mapping[str, int]:
        """A read-only live view (handlers run one at a time on the event loop)."""
        return self._view

    def _record(self, container_id: str, quota: int | None) -> None:
        if not container_id or quota is None:
            return
        self._quota.pop(container_id, None)
        self._quota[container_id] = quota
        while len(self._quota) > self._max:
            del self._quota[next(iter(self._quota))]

    def observe(self, event: Event) -> None:
        """Policy observer: learn from Create/Update, forget on Remove, prune on Synchronize."""
        container = event.container
        if event.name is EventName.CREATE_CONTAINER and container is not None:
            resources = container.resources
            # No quota at all is remembered as 0 ("nothing to scale"), not as "unknown".
            quota = resources.cpu.quota if resources is not None else None
            self._record(container.id, quota if quota is not None else 0)
        elif event.name is EventName.UPDATE_CONTAINER and container is not None:
            if event.linux_resources is not None:
                self._record(container.id, event.linux_resources.cpu.quota)
        elif event.name is EventName.REMOVE_CONTAINER and container is not None:
            self._quota.pop(container.id, None)
        elif event.name is EventName.SYNCHRONIZE:
            alive = {c.id for c in event.containers}
            for container_id in [k for k in self._quota if k not in alive]:
                del self._quota[container_id]
