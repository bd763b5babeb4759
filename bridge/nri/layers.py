"""The plugin core's own layers on the event path: the state cache and the deadline guard.

`StateTracking` keeps the bridge's view of pods and containers current around every call: it
folds the event in before the inner handler runs and what we answered after (also "no change"
when the inner handler missed its deadline: the runtime still applies its own request).
`DeadlineGuard` runs the inner handler under the call's deadline; a miss or a crash answers
"no change" instead of getting the plugin dropped. Synchronize passes the guard untouched: its
deadline and late delivery belong to the runtime setup (bridge.nri.runtime_setup).

Must not know about the wire or about what handlers do.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from bridge.contract.catalogue import NriEvent
from bridge.nri.cache import StateCache
from bridge.nri.event_call import (
    NO_CHANGE,
    Answer,
    EventCall,
    EventHandler,
    EventRejected,
    Layer,
)
from bridge.proto.nri import api_pb2 as api

log = logging.getLogger(__name__)

# Events the state cache needs to stay current (GET /v1/state, id checks).
CACHE_EVENTS = frozenset({
    NriEvent.RUN_POD_SANDBOX, NriEvent.REMOVE_POD_SANDBOX, NriEvent.CREATE_CONTAINER,
    NriEvent.UPDATE_CONTAINER, NriEvent.STOP_CONTAINER, NriEvent.REMOVE_CONTAINER,
})


@dataclass(slots=True)
class GuardStats:
    deadline_misses: int = 0
    handler_errors: int = 0


class StateTracking(Layer):
    def __init__(self, inner: EventHandler, cache: StateCache) -> None:
        super().__init__(inner)
        self.cache = cache

    def wanted_events(self) -> frozenset[NriEvent]:
        return super().wanted_events() | CACHE_EVENTS

    async def handle(self, call: EventCall) -> Answer:
        if call.event is None:
            self.cache.reset(list(call.pods), list(call.containers))
            answer = await self.inner.handle(call)
            # Updates that come after the deadline go out through UpdateContainers instead and
            # are not folded in here (the runtime may refuse them).
            if (isinstance(answer.response, api.SynchronizeResponse)
                    and asyncio.get_running_loop().time() <= call.deadline):
                self.cache.apply_updates(answer.response.update)
            return answer
        self.cache.observe_request(call.event, call.request)
        answer = await self.inner.handle(call) if self.inner_wants(call) else NO_CHANGE
        self.cache.apply_answer(call.event, call.request, answer.response)
        return answer


class DeadlineGuard(Layer):
    def __init__(self, inner: EventHandler, stats: GuardStats) -> None:
        super().__init__(inner)
        self.stats = stats

    async def handle(self, call: EventCall) -> Answer:
        if call.event is None:
            return await self.inner.handle(call)
        if not self.inner_wants(call):
            return NO_CHANGE
        try:
            async with asyncio.timeout_at(call.deadline):
                return await self.inner.handle(call)
        except EventRejected as exc:  # a handler may raise it instead of answering with it
            return Answer(reject=exc.reason)
        except TimeoutError:
            self.stats.deadline_misses += 1
            log.warning("%s handler missed the deadline; answering with no change", call.name,
                        extra={"event": call.name, "uid": call.uid})
        except Exception:
            self.stats.handler_errors += 1
            log.exception("%s handler failed; answering with no change", call.name,
                          extra={"event": call.name, "uid": call.uid})
        return NO_CHANGE
