"""Unsolicited container updates (Runtime.UpdateContainers), sent outside event handlers.

containerd handles events, Synchronize and UpdateContainers under one lock, so
awaiting UpdateContainers from inside a handler deadlocks until the runtime's
timeout drops us (docs/protocol.md#updatecontainers-and-the-runtimes-lock). Handlers therefore only
*defer* updates; this sender delivers them from its own task after the answer has been written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from bridge.errors import BridgeError
from bridge.proto.nri import api_pb2 as api

log = logging.getLogger(__name__)

MAX_QUEUED_BATCHES = 1024
UPDATE_TIMEOUT_S = 30.0

CallUpdate = Callable[[api.UpdateContainersRequest, float], Awaitable[api.UpdateContainersResponse]]


class UpdateSender:
    """Serializes UpdateContainers calls through one bounded queue and one task."""

    def __init__(self, call: CallUpdate) -> None:
        self._call = call
        self._queue: asyncio.Queue[
            tuple[list[api.ContainerUpdate], asyncio.Future[list[api.ContainerUpdate]] | None]
        ] = asyncio.Queue(MAX_QUEUED_BATCHES)

    def defer(self, updates: Sequence[api.ContainerUpdate]) -> None:
        """Queue updates without waiting (safe from inside event handlers)."""
        if not updates:
            return
        try:
            self._queue.put_nowait((list(updates), None))
        except asyncio.QueueFull:
            log.error("update queue full; dropping %d container updates", len(updates))

    async def send(self, updates: Sequence[api.ContainerUpdate]) -> list[api.ContainerUpdate]:
        """Queue updates and wait for the runtime's answer; returns the failed ones.

        Never call this from an event handler (see module docstring).
        """
        future: asyncio.Future[list[api.ContainerUpdate]] = (
            asyncio.get_running_loop().create_future())
        await self._queue.put((list(updates), future))
        return await future

    async def run(self) -> None:
        """Deliver queued batches until cancelled."""
        while True:
            updates, future = await self._queue.get()
            try:
                failed = await self._deliver(updates)
            except BridgeError as exc:
                log.warning("UpdateContainers failed for %d containers: %s", len(updates), exc)
                if future is not None and not future.done():
                    future.set_exception(exc)
                continue
            if future is not None and not future.done():
                future.set_result(failed)

    def abandon(self, error: BridgeError) -> None:
        """Fail every waiting caller (the connection is gone)."""
        while not self._queue.empty():
            _, future = self._queue.get_nowait()
            if future is not None and not future.done():
                future.set_exception(error)

    async def _deliver(self, updates: list[api.ContainerUpdate]) -> list[api.ContainerUpdate]:
        response = await self._call(api.UpdateContainersRequest(update=updates), UPDATE_TIMEOUT_S)
        if response.failed:
            log.warning("runtime reported %d failed container updates", len(response.failed))
        return list(response.failed)
