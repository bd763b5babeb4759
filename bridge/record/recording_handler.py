"""The recording layer: records every call it serves (see recorder.py) around the next handler.

Records the envelope the call would make and the reply we answered, with the outcome
(answered, rejected, deadline, cancelled). Sees every event the state cache subscribes to as
well, so a recording shows the whole lifecycle even when the inner handler ignores most of it.
Must not change what is answered, or fail serving when the disk fails (the recorder drops).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bridge.contract.capabilities import runtime_ref
from bridge.contract.catalogue import NriEvent
from bridge.contract.codec import reply_json, updates_json
from bridge.contract.request_body import Payload, PayloadBuilder, envelope_document
from bridge.nri.event_call import NO_CHANGE, Answer, EventCall, EventHandler, Layer
from bridge.nri.layers import CACHE_EVENTS
from bridge.proto.nri import api_pb2 as api
from bridge.record.recorder import Recorder


class RecordingHandler(Layer):
    def __init__(self, inner: EventHandler, recorder: Recorder) -> None:
        super().__init__(inner)
        self.recorder = recorder
        self._payloads = PayloadBuilder()  # the webhook handler's encoder, with its own pod cache

    def wanted_events(self) -> frozenset[NriEvent]:
        return super().wanted_events() | CACHE_EVENTS

    def _record(self, call: EventCall, payload: Payload, reply: dict[str, Any],
                outcome: str, started: tuple[float, float]) -> None:
        """`started`: the event loop's time (the deadline's clock: the budget) and
        perf_counter's (the latency, with sub-millisecond resolution under uvloop too)."""
        budget_ms = max(0, int((call.deadline - started[0]) * 1000))
        runtime = runtime_ref(call.runtime.name, call.runtime.version, call.runtime.nri_version)
        doc = envelope_document(call.name, call.uid, runtime, budget_ms, False, payload)
        self.recorder.write(doc, reply, outcome, (time.perf_counter() - started[1]) * 1000)

    async def handle(self, call: EventCall) -> Answer:
        started = asyncio.get_running_loop().time(), time.perf_counter()
        if call.event is None:
            return await self._synchronize(call, started)
        assert call.request is not None
        payload = self._payloads.event(call.name, call.request)
        if not self.inner_wants(call):
            self._record(call, payload, {}, "answered", started)
            return NO_CHANGE
        try:
            answer = await self.inner.handle(call)
        except asyncio.CancelledError:
            # The core answers "no change" when a handler overruns its deadline.
            self._record(call, payload, {}, "deadline", started)
            raise
        if answer.reject is not None:
            self._record(call, payload, {"reject": {"reason": answer.reject}}, "rejected",
                         started)
        else:
            self._record(call, payload, reply_json(answer.response), "answered", started)
        return answer

    async def _synchronize(self, call: EventCall, started: tuple[float, float]) -> Answer:
        payload = self._payloads.sync(call.pods, call.containers)
        try:
            answer = await self.inner.handle(call)
        except asyncio.CancelledError:
            self._record(call, payload, {}, "cancelled", started)
            raise
        updates = (answer.response.update
                   if isinstance(answer.response, api.SynchronizeResponse) else ())
        self._record(call, payload, updates_json(updates), "answered", started)
        return answer
