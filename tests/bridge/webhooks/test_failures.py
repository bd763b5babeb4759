"""Every failure path, under both failure policies, against a real HTTP policy double."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bridge.nri.handler_api import EventRejected
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.breaker import CircuitBreaker, CircuitState
from bridge.webhooks.webhook_handler import CALL_MARGIN_S, WebhookHandler
from tests.bridge.webhooks.helpers import CREATED_ID, context, request, spec
from tests.bridge.webhooks.policy_double import Reply, Route, Seen, policy_double, refusing_socket
from tests.event_path import serve, serve_sync

# The deadlines, budgets and back-offs here run on the event loop's clock: looptime moves it
# to the next timer whenever the loop has nothing else to do (the double runs in this loop),
# so a 1 s runtime deadline takes no second of wall time (docs/performance.md#make-check).
pytestmark = pytest.mark.looptime

PATH = "/v1/policy"
KNOWN = "c0ffee00"
REFUSED = Reply(status=-1)  # no server: the webhook points at a socket that refuses


def _state(breaker: CircuitBreaker) -> CircuitState:
    """The breaker's state, read through a call: mypy would keep `breaker.state` narrowed by one
    assert across the calls that change it."""
    return breaker.state


async def _slow(_: Seen) -> Reply:
    await asyncio.Event().wait()  # never answers: only the bridge's own timeout ends the call
    return Reply(json={})


# The webhook timeout of each case: short where the timeout is the point, else one that only a
# hang would reach, so a slow machine cannot turn another failure into a timeout.
def _timeout(case: str) -> str:
    return "100ms" if case == "timeout" else "30s"


RUNTIME_BUDGET_S = 60.0  # the runtime's deadline, generous for the same reason


def _cpu(**cpu: Any) -> dict[str, Any]:
    return {"adjust": {"linux": {"resources": {"cpu": cpu}}}}


# name -> (the policy's answer, expected outcome label, reason fragment)
FAILURES: dict[str, tuple[Any, str, str]] = {
    "timeout": (_slow, "timeout", "no reply within"),
    "connection refused": (REFUSED, "connect_error", "Connection refused"),
    "5xx": (Reply(503, body=b"overloaded"), "http_status", "HTTP 503: overloaded"),
    "invalid json": (Reply(body=b"{nope"), "invalid_json", "not JSON"),
    "schema violation": (Reply(json=_cpu(shares="many")),
                         "schema_violation", "adjust.linux.resources.cpu.shares"),
    "reply key not allowed": (Reply(json={"bogus": 1}),
                              "schema_violation", "reply.bogus: not allowed"),
    "disallowed adjustment": (Reply(
        json={"adjust": {"mounts": [{"destination": "/x", "source": "/y"}]}}),
        "disallowed", "mounts not in the webhook's allow list"),
    "disallowed removal": (Reply(
        json={"adjust": {"remove": {"devices": ["/dev/fuse"]}}}),
        "disallowed", "devices not in the webhook's allow list"),
    "invalid cpuset": (Reply(json=_cpu(cpus="0-a")),
                       "invalid_value", "invalid cpuset '0-a'"),
    "reversed cpuset range": (Reply(json=_cpu(cpus="3-1")),
                              "invalid_value", "invalid range '3-1'"),
    "out of range": (Reply(json=_cpu(shares=1)),
                     "invalid_value", "cpu.shares: 1 out of range"),
    "unknown container": (Reply(json={"update": [
        {"container_id": "nope", "linux": {"resources": {"cpu": {"shares": 10}}}}]}),
        "invalid_value", "unknown container 'nope'"),
    "update of the created container": (Reply(json={"update": [
        {"container_id": CREATED_ID, "linux": {"resources": {"cpu": {"shares": 10}}}}]}),
        "invalid_value", "is the container being created"),
    "same key twice": (Reply(json={"adjust": {"env": [
        {"key": "A", "value": "1"}, {"key": "A", "value": "2"}]}}),
        "invalid_value", "sets env 'A' more than once"),
    "too large": (Reply(body=b" " * ((1 << 20) + 10)),
                  "reply_too_large", "exceeds"),
}


@asynccontextmanager
async def _serving(answer: Any, policy: str = "Ignore", webhook_timeout: str = "100ms",
                   **kw: Any,
                   ) -> AsyncIterator[tuple[WebhookHandler, Route]]:
    """A handler with one CreateContainer webhook whose policy gives `answer`."""
    async with policy_double() as double:
        route = double.route(PATH, answer)
        with refusing_socket() as refusing:
            sock = refusing if answer is REFUSED else double.sock
            hook = spec(events=["CreateContainer"], failure_policy=policy, timeout=webhook_timeout,
                        sock=sock, **kw)
            handler = WebhookHandler([hook],
                                     knows_container=lambda cid: cid in (KNOWN, CREATED_ID))
            try:
                yield handler, route
            finally:
                await handler.aclose()


@pytest.mark.parametrize("case", FAILURES)
async def test_ignore_drops_the_contribution(case: str,
                                             caplog: pytest.LogCaptureFixture) -> None:
    answer, outcome, reason = FAILURES[case]
    async with _serving(answer, "Ignore", _timeout(case)) as (handler, _):
        with caplog.at_level("WARNING"):
            result = await serve(handler, context("CreateContainer", RUNTIME_BUDGET_S),
                                 request("CreateContainer"))
    # No clock: the outcome label says what ended the call (for "timeout", the policy
    # never answers, so only the webhook's own timeout could have ended it).
    assert result is None
    line = next(r for r in caplog.records if r.getMessage() == "webhook call failed")
    assert line.outcome == outcome  # type: ignore[attr-defined]
    assert reason in line.reason  # type: ignore[attr-defined]
    assert line.action == "ignore its contribution"  # type: ignore[attr-defined]
    m = handler.metrics
    assert m.fail_open.labels("CreateContainer", "policy")._value.get() == 1
    assert m.requests.labels("CreateContainer", "policy", outcome)._value.get() == 1


@pytest.mark.parametrize("case", FAILURES)
async def test_fail_rejects_naming_webhook_and_reason(case: str) -> None:
    answer, outcome, reason = FAILURES[case]
    async with _serving(answer, "Fail", _timeout(case)) as (handler, _):
        with pytest.raises(EventRejected) as caught:
            await serve(handler, context("CreateContainer", RUNTIME_BUDGET_S),
                        request("CreateContainer"))
    assert caught.value.reason.startswith(f'webhook "policy" failed ({outcome}): ')
    assert reason in caught.value.reason
    assert handler.metrics.rejections.labels("CreateContainer", "policy")._value.get() == 1


async def test_budget_is_capped_by_the_runtime_deadline() -> None:
    # The webhook allows 30 s, the runtime 1 s: the call's budget (sent to the policy and
    # used as the client's timeout) is what is left of the runtime's 1 s, not 30 s.
    loop = asyncio.get_running_loop()
    async with _serving(_slow, webhook_timeout="30s") as (handler, route):
        ctx = context("CreateContainer", budget_s=1.0)
        started = loop.time()
        await serve(handler, ctx, request("CreateContainer"))
    assert handler.metrics.requests.labels("CreateContainer", "policy",
                                           "timeout")._value.get() == 1
    [seen] = route.calls
    # Bounds from the clock itself, not from how busy the machine is (as below).
    assert 0 < seen.json()["budget_ms"] <= (ctx.deadline - started - CALL_MARGIN_S) * 1000 + 1


async def test_later_webhook_gets_what_is_left() -> None:
    loop = asyncio.get_running_loop()
    budgets: list[int] = []
    arrivals: list[float] = []

    async def answer(seen: Seen) -> Reply:
        arrivals.append(loop.time())  # the double runs in this loop: the same clock
        budgets.append(seen.json()["budget_ms"])
        await asyncio.sleep(0.1)
        return Reply(json={})

    async with policy_double() as double:
        double.route("/a", answer)
        double.route("/b", answer)
        first = spec("first", "/a", sock=double.sock, events=["CreateContainer"], timeout="60s")
        second = spec("second", "/b", sock=double.sock, events=["CreateContainer"],
                      timeout="60s")
        handler = WebhookHandler([first, second])
        # A runtime deadline far beyond the two calls, so both are made however slow the
        # machine; each budget is then bounded by that deadline, which is what is checked.
        ctx = context("CreateContainer", budget_s=30.0)
        started = loop.time()
        await serve(handler, ctx, request("CreateContainer"))
        await handler.aclose()
    # Bounds from the clock itself, not from how busy the machine is: each budget was
    # computed after `started` and before its request arrived, minus the call margin.
    for budget, arrived in zip(budgets, arrivals, strict=True):
        assert (ctx.deadline - arrived - CALL_MARGIN_S) * 1000 - 1 <= budget
        assert budget <= (ctx.deadline - started - CALL_MARGIN_S) * 1000 + 1
    # The second webhook gets only what the first one left (it slept 100 ms).
    assert budgets[1] <= budgets[0] - 95


async def test_no_time_left_is_a_budget_failure() -> None:
    async with _serving(Reply(json={})) as (handler, route):
        assert await serve(handler,
            context("CreateContainer", budget_s=0.001), request("CreateContainer"),
        ) is None
    assert not route.called
    assert handler.metrics.timeouts.labels("CreateContainer", "policy")._value.get() == 1


@asynccontextmanager
async def _two(a_reply: Reply, b_reply: Reply, b_policy: str = "Ignore", **kw: Any,
               ) -> AsyncIterator[WebhookHandler]:
    """Webhooks "alpha" (/a) and "beta" (/b) on CreateContainer."""
    async with policy_double() as double:
        double.route("/a", a_reply)
        double.route("/b", b_reply)
        a = spec("alpha", "/a", sock=double.sock, events=["CreateContainer"])
        b = spec("beta", "/b", sock=double.sock, events=["CreateContainer"],
                 failure_policy=b_policy)
        handler = WebhookHandler([a, b], **kw)
        try:
            yield handler
        finally:
            await handler.aclose()


async def test_conflict_between_two_webhooks_names_both() -> None:
    async with _two(Reply(json={"adjust": {"env": [{"key": "X", "value": "1"}]}}),
                    Reply(json={"adjust": {"env": [{"key": "X", "value": "2"}]}}),
                    "Fail") as handler:
        with pytest.raises(EventRejected, match='webhooks "alpha" and "beta" both tried to set '
                           "env 'X'"):
            await serve(handler, context("CreateContainer"),
                                           request("CreateContainer"))
    assert handler.metrics.conflicts.labels("CreateContainer", "beta")._value.get() == 1


async def test_conflict_under_ignore_keeps_the_earlier_webhook() -> None:
    async with _two(Reply(json=_cpu(shares=512)), Reply(json={"adjust": {
            "env": [{"key": "B", "value": "1"}],
            "linux": {"resources": {"cpu": {"shares": 1024}}}}})) as handler:
        result = await serve(handler, context("CreateContainer"),
                                                request("CreateContainer"))
    assert isinstance(result, api.CreateContainerResponse)
    assert result.adjust.linux.resources.cpu.shares.value == 512
    assert not result.adjust.env  # beta's whole contribution was dropped


async def test_disjoint_contributions_merge_in_order() -> None:
    upd = {"container_id": KNOWN, "linux": {"resources": {"cpu": {"shares": 100}}},
           "ignore_failure": True}
    upd2 = {"container_id": KNOWN, "linux": {"resources": {"memory": {"limit": 1 << 30}}}}
    async with _two(Reply(json={**_cpu(shares=512), "update": [upd]}), Reply(json={"adjust": {
            "env": [{"key": "B", "value": "1"}], "annotations": {"b": "yes"},
            "linux": {"resources": {"cpu": {"cpus": "0-3,8"}}}}, "update": [upd2]}),
            knows_container=lambda cid: cid == KNOWN) as handler:
        result = await serve(handler, context("CreateContainer"),
                                                request("CreateContainer"))
    assert isinstance(result, api.CreateContainerResponse)
    cpu = result.adjust.linux.resources.cpu
    assert (cpu.shares.value, cpu.cpus) == (512, "0-3,8")
    assert dict(result.adjust.annotations) == {"b": "yes"}
    [update] = result.update
    assert update.linux.resources.cpu.shares.value == 100
    assert update.linux.resources.memory.limit.value == 1 << 30
    assert update.ignore_failure is False  # AND of both contributors


async def test_circuit_opens_and_skips_calls_then_probes() -> None:
    calls = 0
    up = False

    async def answer(_: Seen) -> Reply:
        nonlocal calls
        calls += 1
        return Reply(json={}) if up else Reply(503, body=b"down")

    now = 0.0  # the breaker's clock, moved by the test: no race with a real cool-down
    async with _serving(answer, webhook_timeout="30s") as (handler, _):
        [webhook] = handler.webhooks
        webhook.breaker = CircuitBreaker("policy", failure_threshold=2, cool_down_s=0.05,
                                         clock=lambda: now)
        for _ in range(2):
            await serve(handler, context("CreateContainer"),
                                           request("CreateContainer"))
        assert _state(webhook.breaker) is CircuitState.OPEN
        await serve(handler, context("CreateContainer"),
                                       request("CreateContainer"))
        assert calls == 2  # skipped while open
        assert handler.metrics.requests.labels(
            "CreateContainer", "policy", "circuit_open")._value.get() == 1
        now += 0.06  # the cool-down is over
        up = True
        await serve(handler, context("CreateContainer"),
                                       request("CreateContainer"))
        assert calls == 3
        assert _state(webhook.breaker) is CircuitState.CLOSED


async def test_open_circuit_under_fail_rejects() -> None:
    async with _serving(REFUSED, "Fail", circuit_breaker={"failure_threshold": 1,
                                                          "cool_down": "10s"}) as (handler, _):
        with pytest.raises(EventRejected):
            await serve(handler, context("CreateContainer"),
                                           request("CreateContainer"))
        with pytest.raises(EventRejected, match=r"\(circuit_open\): circuit open"):
            await serve(handler, context("CreateContainer"),
                                           request("CreateContainer"))


async def test_schema_violation_does_not_trip_the_breaker() -> None:
    async with _serving(Reply(json={"bogus": True}),
                        circuit_breaker={"failure_threshold": 1}) as (handler, _):
        for _ in range(3):
            await serve(handler, context("CreateContainer"),
                                           request("CreateContainer"))
    assert handler.webhooks[0].breaker.state is CircuitState.CLOSED


async def test_synchronize_uses_the_webhook_timeout_not_the_runtime_budget() -> None:
    from tests.bridge.webhooks.helpers import sync_objects
    pods, containers = sync_objects()
    cid = containers[0].id

    async def slowish(_: Seen) -> Reply:
        await asyncio.sleep(0.2)
        return Reply(json={"update": [
            {"container_id": cid, "linux": {"resources": {"cpu": {"cpus": "1"}}}}]})

    async with policy_double() as double:
        route = double.route(PATH, slowish)
        # sync_timeout only a hang reaches; the runtime's 50 ms does not apply to Synchronize.
        hook = spec(events=["Synchronize"], sync_timeout="20s", timeout="100ms",
                    sock=double.sock)
        handler = WebhookHandler([hook])
        updates = await serve_sync(handler, context("Synchronize", budget_s=0.05), pods,
                                            containers)
        await handler.aclose()
    assert route.calls[-1].json()["budget_ms"] == 20000
    assert [u.container_id for u in updates] == [cid]
