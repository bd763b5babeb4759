"""A Handler wrapper that records every event it serves (see recorder.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from google.protobuf.message import Message

from bridge.contract.capabilities import runtime_ref
from bridge.contract.catalogue import Event
from bridge.contract.codec import envelope, reply_json, request_payload, sync_payload, updates_json
from bridge.nri.handler_api import (
    HANDLER_METHODS,
    EventContext,
    EventRejected,
    Handler,
    RuntimeInfo,
)
from bridge.nri.service import CACHE_EVENTS
from bridge.proto.nri import api_pb2 as api
from bridge.record.recorder import Recorder


class RecordingHandler(Handler):
    def __init__(self, inner: Handler, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder
        self._inner_events: frozenset[Event] = frozenset()

    def wanted_events(self) -> frozenset[Event]:
        self._inner_events = self.inner.wanted_events()
        return self._inner_events | CACHE_EVENTS

    async def configure(self, runtime: RuntimeInfo) -> None:
        await self.inner.configure(runtime)

    def _record(self, ctx: EventContext, payload: dict[str, Any], reply: dict[str, Any],
                outcome: str, started: float) -> None:
        loop = asyncio.get_running_loop()
        budget_ms = max(0, int((ctx.deadline - started) * 1000))
        runtime = runtime_ref(ctx.runtime.name, ctx.runtime.version, ctx.runtime.nri_version)
        doc = envelope(ctx.name, ctx.uid, runtime, budget_ms, False, payload)
        self.recorder.write(doc, reply, outcome, (loop.time() - started) * 1000)

    async def synchronize(self, ctx: EventContext, pods: Sequence[api.PodSandbox],
                          containers: Sequence[api.Container]) -> Sequence[api.ContainerUpdate]:
        started = asyncio.get_running_loop().time()
        payload = sync_payload(tuple(pods), tuple(containers))
        try:
            updates = await self.inner.synchronize(ctx, pods, containers)
        except asyncio.CancelledError:
            self._record(ctx, payload, {}, "cancelled", started)
            raise
        self._record(ctx, payload, updates_json(updates), "answered", started)
        return updates

    async def _serve(self, event: Event, ctx: EventContext, req: Message) -> Message | None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        payload = request_payload(req)
        if event not in self._inner_events:
            self._record(ctx, payload, {}, "answered", started)
            return None
        try:
            response: Message | None = await getattr(self.inner, HANDLER_METHODS[event])(ctx, req)
        except EventRejected as exc:
            self._record(ctx, payload, {"reject": {"reason": exc.reason}}, "rejected", started)
            raise
        except asyncio.CancelledError:
            # The core answers "no change" when a handler overruns its deadline.
            self._record(ctx, payload, {}, "deadline", started)
            raise
        self._record(ctx, payload, reply_json(response), "answered", started)
        return response


def _method(event: Event) -> Any:
    async def serve(self: RecordingHandler, ctx: EventContext, req: Message) -> Message | None:
        return await self._serve(event, ctx, req)
    serve.__name__ = HANDLER_METHODS[event]
    return serve


for _event, _attr in HANDLER_METHODS.items():
    setattr(RecordingHandler, _attr, _method(_event))
