"""Deliver the container updates policies ask to push (``Decision.push``) through the bridge.

Owns one queue and the one task that drains it, in order: a policy that first shrinks and then
grows a cpuset must have the runtime see them in that order. Delivery happens after the reply
has left, never inside the request: the bridge is then still in the event, the runtime holds its
lock until the event is answered, and UpdateContainers would wait for it (nri-protocol §4.7).
A bridge that cannot be reached is retried a few times with back-off; updates the runtime
reports as failed are logged. Must not evaluate policies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from policy_server.bridge_link.control_client import BridgeControl
from policy_server.exceptions import BridgeControlError
from policy_server.telemetry import Metrics

log = logging.getLogger(__name__)

# Updates per POST /v1/updates (the bridge takes bodies up to 1 MiB).
PUSH_BATCH = 500
PUSH_ATTEMPTS = 3
PUSH_RETRY_S = 0.5
MAX_QUEUED = 1000
CLOSE_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class PushJob:
    """Updates one evaluation asked for, in reply JSON form, and where they came from."""

    policy: str
    context: str
    updates: tuple[dict[str, Any], ...]


class Pusher:
    """The ordered push queue of one policy server."""

    def __init__(self, bridge: BridgeControl, metrics: Metrics) -> None:
        self._bridge = bridge
        self._metrics = metrics
        self._queue: asyncio.Queue[PushJob] = asyncio.Queue(MAX_QUEUED)
        self._task: asyncio.Task[None] | None = None

    def submit(self, job: PushJob) -> bool:
        """Queue ``job`` without waiting; False (and logged) when the queue is full."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="policy-server-pusher"
            )
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            log.error(
                "push queue full (%d jobs); dropping %d updates policy=%s %s",
                MAX_QUEUED,
                len(job.updates),
                job.policy,
                job.context,
            )
            return False
        return True

    async def join(self) -> None:
        """Wait until everything queued so far has been delivered (or given up)."""
        await self._queue.join()

    async def aclose(self) -> None:
        """Deliver what is queued (bounded by ``CLOSE_TIMEOUT_S``), then stop the task."""
        task, self._task = self._task, None
        if task is None:
            return
        try:
            await asyncio.wait_for(self._queue.join(), CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.error("undelivered pushes dropped at shutdown: %d jobs", self._queue.qsize())
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while True:
            job = await self._queue.get()
            try:
                await self._deliver(job)
            except Exception:  # the task boundary: log, keep serving later jobs
                log.exception("push failed policy=%s %s", job.policy, job.context)
            finally:
                self._queue.task_done()

    async def _deliver(self, job: PushJob) -> None:
        failed: list[Any] = []
        for start in range(0, len(job.updates), PUSH_BATCH):
            batch = list(job.updates[start : start + PUSH_BATCH])
            failed.extend(await self._send(job, batch))
            self._metrics.pushed_updates.inc(len(batch))
        log.info(
            "pushed %d updates through the bridge, %d failed policy=%s %s",
            len(job.updates),
            len(failed),
            job.policy,
            job.context,
        )
        for item in failed:
            log.warning("bridge reports failed update %r policy=%s", item, job.policy)

    async def _send(self, job: PushJob, batch: Sequence[dict[str, Any]]) -> list[Any]:
        delay = PUSH_RETRY_S
        for attempt in range(1, PUSH_ATTEMPTS + 1):
            try:
                return await self._bridge.push_updates(list(batch))
            except BridgeControlError as exc:
                if attempt == PUSH_ATTEMPTS:
                    log.error(
                        "gave up pushing %d updates after %d attempts policy=%s %s: %s",
                        len(batch),
                        attempt,
                        job.policy,
                        job.context,
                        exc,
                    )
                    return list(batch)
                log.warning("push attempt %d failed, retrying in %.1fs: %s", attempt, delay, exc)
                await asyncio.sleep(delay)
                delay *= 2
        return list(batch)  # not reached: the loop returns on its last attempt
