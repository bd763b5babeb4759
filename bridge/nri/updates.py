"""Unsolicited container updates, sent outside event handlers by one task.

A runtime handles events, Synchronize and a plugin's UpdateContainers under its locks, so
awaiting an update from inside a handler would wait for the answer it is part of
(docs/protocol.md#updatecontainers-and-the-runtimes-lock). Handlers therefore only *defer*
updates; this sender delivers them from its own task, by the route the session chose for the
runtime (bridge.nri.update_routes: NRI UpdateContainers, or CRI UpdateContainerResources where
UpdateContainers can deadlock the runtime).

Owns: the bounded queue, the one delivering task, and what a delivery returns
(`UpdateOutcome`). Must not: choose the route or know how it travels.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from bridge.errors import BridgeError
from bridge.proto.nri import api_pb2 as api

log = logging.getLogger(__name__)

MAX_QUEUED_BATCHES = 1024
UPDATE_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class UpdateOutcome:
    """What the runtime did with a batch of updates."""

    route: str
    failed: list[api.ContainerUpdate] = field(default_factory=list)
    # What reached the runtime and was accepted, without the leaves the route cannot carry.
    applied: list[api.ContainerUpdate] = field(default_factory=list)
    # container id -> dotted NRI leaves the route could not carry ("memory.swappiness").
    dropped: dict[str, tuple[str, ...]] = field(default_factory=dict)


Deliver = Callable[[list[api.ContainerUpdate]], Awaitable[UpdateOutcome]]
Batch = tuple[list[api.ContainerUpdate], "asyncio.Future[UpdateOutcome] | None"]


class UpdateSender:
    """Serializes deliveries through one bounded queue and one task."""

    def __init__(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self._queue: asyncio.Queue[Batch] = asyncio.Queue(MAX_QUEUED_BATCHES)

    def defer(self, updates: Sequence[api.ContainerUpdate]) -> None:
        """Queue updates without waiting (safe from inside event handlers)."""
        if not updates:
            return
        try:
            self._queue.put_nowait((list(updates), None))
        except asyncio.QueueFull:
            log.error("update queue full; dropping %d container updates", len(updates))

    async def send(self, updates: Sequence[api.ContainerUpdate]) -> UpdateOutcome:
        """Queue updates and wait for the runtime's answer.

        Never call this from an event handler (see module docstring).
        """
        future: asyncio.Future[UpdateOutcome] = asyncio.get_running_loop().create_future()
        await self._queue.put((list(updates), future))
        return await future

    async def run(self) -> None:
        """Deliver queued batches until cancelled."""
        while True:
            updates, future = await self._queue.get()
            try:
                outcome = await self._deliver(updates)
            except BridgeError as exc:
                log.warning("container updates failed", extra={
                    "containers": len(updates), "reason": str(exc)})
                if future is not None and not future.done():
                    future.set_exception(exc)
                continue
            _log_outcome(outcome)
            if future is not None and not future.done():
                future.set_result(outcome)

    def abandon(self, error: BridgeError) -> None:
        """Fail every waiting caller (the connection is gone)."""
        while not self._queue.empty():
            _, future = self._queue.get_nowait()
            if future is not None and not future.done():
                future.set_exception(error)


def _log_outcome(outcome: UpdateOutcome) -> None:
    if outcome.failed:
        log.warning("runtime refused container updates", extra={
            "route": outcome.route, "failed": [u.container_id for u in outcome.failed]})
    for container_id, leaves in outcome.dropped.items():
        log.warning("update fields the runtime cannot apply were dropped", extra={
            "route": outcome.route, "container": container_id, "fields": list(leaves)})
