"""The one event path's parts in isolation: the per-event adapter, the deadline guard, the
state-tracking layer and the reply rules of the dispatch table."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from bridge.contract.catalogue import NriEvent
from bridge.errors import RpcError
from bridge.nri.cache import StateCache
from bridge.nri.dispatch import _reply
from bridge.nri.event_call import NO_CHANGE, Answer, EventCall, EventRejected, RuntimeInfo
from bridge.nri.handler_api import EventContext, Handler
from bridge.nri.layers import CACHE_EVENTS, DeadlineGuard, GuardStats, StateTracking
from bridge.proto.nri import api_pb2 as api

RUNTIME = RuntimeInfo("containerd", "2.1.9", (0, 8, 0), "", 5.0, 2.0)


def call(event: NriEvent | None, request: object = None, budget_s: float = 1.0,
         **kw: object) -> EventCall:
    name = event.rpc_name if event is not None else "Synchronize"
    return EventCall(event=event, name=name, uid="u", runtime=RUNTIME, via_state_change=False,
                     deadline=asyncio.get_running_loop().time() + budget_s,
                     defer_updates=lambda _: None, request=request, **kw)  # type: ignore[arg-type]


def created(cid: str = "c1") -> api.CreateContainerRequest:
    return api.CreateContainerRequest(pod=api.PodSandbox(id="p1"),
                                      container=api.Container(id=cid, pod_sandbox_id="p1"))


class Stub(Handler):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def create_container(self, ctx: EventContext, req: api.CreateContainerRequest,
                               ) -> api.CreateContainerResponse | None:
        self.seen.append(ctx.name)
        adjust = api.ContainerAdjustment()
        adjust.linux.resources.cpu.shares.value = 512
        return api.CreateContainerResponse(adjust=adjust)

    async def start_container(self, ctx: EventContext, req: api.StartContainerRequest) -> None:
        raise EventRejected("not today")

    async def synchronize(self, ctx: EventContext, pods: Sequence[api.PodSandbox],
                          containers: Sequence[api.Container]) -> Sequence[api.ContainerUpdate]:
        return [api.ContainerUpdate(container_id=c.id) for c in containers]


async def test_the_adapter_calls_the_method_named_after_the_event() -> None:
    stub = Stub()
    assert stub.wanted_events() == {NriEvent.CREATE_CONTAINER, NriEvent.START_CONTAINER}
    answer = await stub.handle(call(NriEvent.CREATE_CONTAINER, created()))
    assert isinstance(answer.response, api.CreateContainerResponse)
    assert answer.response.adjust.linux.resources.cpu.shares.value == 512
    assert stub.seen == ["CreateContainer"]
    assert await stub.handle(call(NriEvent.START_CONTAINER, api.StartContainerRequest())) == Answer(
        reject="not today")
    assert await stub.handle(call(NriEvent.STOP_CONTAINER, api.StopContainerRequest())) == NO_CHANGE
    sync = await stub.handle(call(None, containers=[api.Container(id="a")]))
    assert isinstance(sync.response, api.SynchronizeResponse)
    assert [u.container_id for u in sync.response.update] == ["a"]


class Slow(Handler):
    async def create_container(self, ctx: EventContext, req: api.CreateContainerRequest,
                               ) -> api.CreateContainerResponse | None:
        await asyncio.sleep(10)
        return None

    async def stop_container(self, ctx: EventContext, req: api.StopContainerRequest,
                             ) -> api.StopContainerResponse | None:
        raise RuntimeError("bug")


async def test_the_guard_answers_no_change_on_a_miss_or_a_crash_and_counts_them() -> None:
    stats = GuardStats()
    guard = DeadlineGuard(Slow(), stats)
    assert guard.wanted_events() == {NriEvent.CREATE_CONTAINER, NriEvent.STOP_CONTAINER}
    slow = call(NriEvent.CREATE_CONTAINER, created(), budget_s=0.01)
    assert await guard.handle(slow) == NO_CHANGE
    crashing = call(NriEvent.STOP_CONTAINER, api.StopContainerRequest())
    assert await guard.handle(crashing) == NO_CHANGE
    assert (stats.deadline_misses, stats.handler_errors) == (1, 1)


async def test_the_guard_does_not_call_a_handler_for_events_it_did_not_ask_for() -> None:
    stub = Stub()
    guard = DeadlineGuard(stub, GuardStats())
    guard.wanted_events()
    run = call(NriEvent.RUN_POD_SANDBOX, api.RunPodSandboxRequest())
    assert await guard.handle(run) == NO_CHANGE
    assert stub.seen == []


async def test_tracking_folds_in_the_event_and_what_was_answered() -> None:
    cache = StateCache()
    layer = StateTracking(Stub(), cache)
    assert layer.wanted_events() >= CACHE_EVENTS | {NriEvent.CREATE_CONTAINER}
    await layer.handle(call(NriEvent.CREATE_CONTAINER, created("c1")))
    assert cache.containers["c1"].linux.resources.cpu.shares.value == 512
    assert cache.containers["c1"].state == api.CONTAINER_CREATED
    await layer.handle(call(NriEvent.REMOVE_CONTAINER, api.RemoveContainerRequest(
        pod=api.PodSandbox(id="p1"), container=api.Container(id="c1"))))
    assert "c1" not in cache.containers


async def test_tracking_keeps_late_sync_updates_out_of_the_view() -> None:
    class Late(Stub):
        async def synchronize(self, ctx: EventContext, pods: Sequence[api.PodSandbox],
                              containers: Sequence[api.Container],
                              ) -> Sequence[api.ContainerUpdate]:
            await asyncio.sleep(0.05)
            update = api.ContainerUpdate(container_id="a")
            update.linux.resources.cpu.shares.value = 7
            return [update]

    cache = StateCache()
    layer = StateTracking(Late(), cache)
    layer.wanted_events()
    await layer.handle(call(None, budget_s=0.0, containers=[api.Container(id="a")]))
    assert list(cache.containers) == ["a"]  # reset from the call's state
    assert not cache.containers["a"].linux.resources.cpu.HasField("shares")
    await layer.handle(call(None, budget_s=60.0, containers=[api.Container(id="a")]))
    assert cache.containers["a"].linux.resources.cpu.shares.value == 7  # in time: folded in


def test_replies_follow_the_events_rules() -> None:
    rejected = _reply(NriEvent.VALIDATE_CONTAINER_ADJUSTMENT, Answer(reject="no"))
    assert rejected == api.ValidateContainerAdjustmentResponse(reject=True, reason="no")
    with pytest.raises(RpcError, match="no"):
        _reply(NriEvent.CREATE_CONTAINER, Answer(reject="no"))
    wrong = Answer(api.UpdateContainerResponse())  # a handler bug: wrong type for the event
    assert _reply(NriEvent.CREATE_CONTAINER, wrong) is None
    right = api.CreateContainerResponse()
    assert _reply(NriEvent.CREATE_CONTAINER, Answer(right)) is right
