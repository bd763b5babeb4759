"""respx tests for every failure path, under both failure policies."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import respx

from bridge.nri.handler_api import EventRejected
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.breaker import CircuitState
from bridge.webhooks.fanout import CALL_MARGIN_S, WebhookHandler
from tests.event_path import serve, serve_sync
from tests.webhooks.helpers import BASE, CREATED_ID, context, request, spec

URL = f"{BASE}/v1/policy"
KNOWN = "c0ffee00"


async def _slow(request: httpx.Request) -> httpx.Response:
    await asyncio.sleep(5)
    return httpx.Response(200, json={})


def _cpu(**cpu: Any) -> dict[str, Any]:
    return {"adjust": {"linux": {"resources": {"cpu": cpu}}}}


# name -> (respx route setup, expected outcome label, reason fragment)
FAILURES: dict[str, tuple[dict[str, Any], str, str]] = {
    "timeout": ({"side_effect": _slow}, "timeout", "no reply within"),
    "connection refused": ({"side_effect": httpx.ConnectError("Connection refused")},
                           "connect_error", "Connection refused"),
    "5xx": ({"return_value": httpx.Response(503, text="overloaded")}, "http_status",
            "HTTP 503: overloaded"),
    "invalid json": ({"return_value": httpx.Response(200, content=b"{nope")}, "invalid_json",
                     "not JSON"),
    "schema violation": ({"return_value": httpx.Response(200, json=_cpu(shares="many"))},
                         "schema_violation", "adjust.linux.resources.cpu.shares"),
    "reply key not allowed": ({"return_value": httpx.Response(200, json={"bogus": 1})},
                              "schema_violation", "reply.bogus: not allowed"),
    "disallowed adjustment": ({"return_value": httpx.Response(
        200, json={"adjust": {"mounts": [{"destination": "/x", "source": "/y"}]}})},
        "disallowed", "mounts not in the webhook's allow list"),
    "disallowed removal": ({"return_value": httpx.Response(
        200, json={"adjust": {"remove": {"devices": ["/dev/fuse"]}}})},
        "disallowed", "devices not in the webhook's allow list"),
    "invalid cpuset": ({"return_value": httpx.Response(200, json=_cpu(cpus="0-a"))},
                       "invalid_value", "invalid cpuset '0-a'"),
    "reversed cpuset range": ({"return_value": httpx.Response(200, json=_cpu(cpus="3-1"))},
                              "invalid_value", "invalid range '3-1'"),
    "out of range": ({"return_value": httpx.Response(200, json=_cpu(shares=1))},
                     "invalid_value", "cpu.shares: 1 out of range"),
    "unknown container": ({"return_value": httpx.Response(200, json={"update": [
        {"container_id": "nope", "linux": {"resources": {"cpu": {"shares": 10}}}}]})},
        "invalid_value", "unknown container 'nope'"),
    "update of the created container": ({"return_value": httpx.Response(200, json={"update": [
        {"container_id": CREATED_ID, "linux": {"resources": {"cpu": {"shares": 10}}}}]})},
        "invalid_value", "is the container being created"),
    "same key twice": ({"return_value": httpx.Response(200, json={"adjust": {"env": [
        {"key": "A", "value": "1"}, {"key": "A", "value": "2"}]}})},
        "invalid_value", "sets env 'A' more than once"),
    "too large": ({"return_value": httpx.Response(200, content=b" " * ((1 << 20) + 10))},
                  "reply_too_large", "exceeds"),
}


def _handler(policy: str, **kw: Any) -> WebhookHandler:
    hook = spec(events=["CreateContainer"], failure_policy=policy, timeout="100ms", **kw)
    return WebhookHandler([hook], knows_container=lambda cid: cid in (KNOWN, CREATED_ID))


@pytest.mark.parametrize("case", FAILURES)
async def test_ignore_drops_the_contribution(case: str,
                                             caplog: pytest.LogCaptureFixture) -> None:
    setup, outcome, reason = FAILURES[case]
    handler = _handler("Ignore")
    with respx.mock(using="httpx", assert_all_called=False) as mock, caplog.at_level("WARNING"):
        mock.post(URL).mock(**setup)
        started = asyncio.get_running_loop().time()
        result = await serve(handler, context("CreateContainer"), request(
            "CreateContainer"))
        elapsed = asyncio.get_running_loop().time() - started
    assert result is None
    assert elapsed < 0.5
    line = next(r for r in caplog.records if r.getMessage() == "webhook call failed")
    assert line.outcome == outcome  # type: ignore[attr-defined]
    assert reason in line.reason  # type: ignore[attr-defined]
    assert line.action == "ignore its contribution"  # type: ignore[attr-defined]
    m = handler.metrics
    assert m.fail_open.labels("CreateContainer", "policy")._value.get() == 1
    assert m.requests.labels("CreateContainer", "policy", outcome)._value.get() == 1


@pytest.mark.parametrize("case", FAILURES)
async def test_fail_rejects_naming_webhook_and_reason(case: str) -> None:
    setup, outcome, reason = FAILURES[case]
    handler = _handler("Fail")
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL).mock(**setup)
        with pytest.raises(EventRejected) as caught:
            await serve(handler, context("CreateContainer"), request(
                "CreateContainer"))
    assert caught.value.reason.startswith(f'webhook "policy" failed ({outcome}): ')
    assert reason in caught.value.reason
    assert handler.metrics.rejections.labels("CreateContainer", "policy")._value.get() == 1


async def test_budget_is_capped_by_the_runtime_deadline() -> None:
    handler = _handler("Ignore")
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL).mock(side_effect=_slow)
        started = asyncio.get_running_loop().time()
        await serve(handler, context("CreateContainer", budget_s=0.05),
                                       request("CreateContainer"))
        elapsed = asyncio.get_running_loop().time() - started
    assert route.calls.call_count == 0  # cancelled mid-call, so respx recorded nothing
    assert handler.metrics.requests.labels("CreateContainer", "policy",
                                           "timeout")._value.get() == 1
    assert elapsed < 0.05  # answered before the (already margin-reduced) deadline


async def test_later_webhook_gets_what_is_left() -> None:
    first = spec("first", "/a", events=["CreateContainer"], timeout="1s")
    second = spec("second", "/b", events=["CreateContainer"], timeout="1s")
    handler = WebhookHandler([first, second])
    loop = asyncio.get_running_loop()
    budgets: list[int] = []
    arrivals: list[float] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        import json
        arrivals.append(loop.time())
        budgets.append(json.loads(request.content)["budget_ms"])
        await asyncio.sleep(0.1)
        return httpx.Response(200, json={})

    ctx = context("CreateContainer", budget_s=0.5)
    started = loop.time()
    with respx.mock(using="httpx") as mock:
        mock.post(f"{BASE}/a").mock(side_effect=answer)
        mock.post(f"{BASE}/b").mock(side_effect=answer)
        await serve(handler, ctx, request("CreateContainer"))
    # Bounds from the clock itself, not from how busy the machine is: each budget was
    # computed after `started` and before its request arrived, minus the call margin.
    for budget, arrived in zip(budgets, arrivals, strict=True):
        assert (ctx.deadline - arrived - CALL_MARGIN_S) * 1000 - 1 <= budget
        assert budget <= (ctx.deadline - started - CALL_MARGIN_S) * 1000 + 1
    # The second webhook gets only what the first one left (it slept 100 ms).
    assert budgets[1] <= budgets[0] - 95


async def test_no_time_left_is_a_budget_failure() -> None:
    handler = _handler("Ignore")
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL).respond(json={})
        assert await serve(handler,
            context("CreateContainer", budget_s=0.001), request("CreateContainer"),
        ) is None
    assert not route.called
    assert handler.metrics.timeouts.labels("CreateContainer", "policy")._value.get() == 1


async def test_conflict_between_two_webhooks_names_both() -> None:
    a = spec("alpha", "/a", events=["CreateContainer"])
    b = spec("beta", "/b", events=["CreateContainer"], failure_policy="Fail")
    handler = WebhookHandler([a, b])
    with respx.mock(using="httpx") as mock:
        mock.post(f"{BASE}/a").respond(json={"adjust": {"env": [{"key": "X", "value": "1"}]}})
        mock.post(f"{BASE}/b").respond(json={"adjust": {"env": [{"key": "X", "value": "2"}]}})
        with pytest.raises(EventRejected, match='webhooks "alpha" and "beta" both tried to set '
                           "env 'X'"):
            await serve(handler, context("CreateContainer"),
                                           request("CreateContainer"))
    assert handler.metrics.conflicts.labels("CreateContainer", "beta")._value.get() == 1


async def test_conflict_under_ignore_keeps_the_earlier_webhook() -> None:
    a = spec("alpha", "/a", events=["CreateContainer"])
    b = spec("beta", "/b", events=["CreateContainer"])
    handler = WebhookHandler([a, b])
    with respx.mock(using="httpx") as mock:
        mock.post(f"{BASE}/a").respond(json=_cpu(shares=512))
        mock.post(f"{BASE}/b").respond(json={"adjust": {
            "env": [{"key": "B", "value": "1"}],
            "linux": {"resources": {"cpu": {"shares": 1024}}}}})
        result = await serve(handler, context("CreateContainer"),
                                                request("CreateContainer"))
    assert result is not None
    assert result.adjust.linux.resources.cpu.shares.value == 512
    assert not result.adjust.env  # beta's whole contribution was dropped


async def test_disjoint_contributions_merge_in_order() -> None:
    a = spec("alpha", "/a", events=["CreateContainer"])
    b = spec("beta", "/b", events=["CreateContainer"])
    handler = WebhookHandler([a, b], knows_container=lambda cid: cid == KNOWN)
    upd = {"container_id": KNOWN, "linux": {"resources": {"cpu": {"shares": 100}}},
           "ignore_failure": True}
    upd2 = {"container_id": KNOWN, "linux": {"resources": {"memory": {"limit": 1 << 30}}}}
    with respx.mock(using="httpx") as mock:
        mock.post(f"{BASE}/a").respond(json={**_cpu(shares=512), "update": [upd]})
        mock.post(f"{BASE}/b").respond(json={"adjust": {
            "env": [{"key": "B", "value": "1"}], "annotations": {"b": "yes"},
            "linux": {"resources": {"cpu": {"cpus": "0-3,8"}}}}, "update": [upd2]})
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
    hook = spec(events=["CreateContainer"], timeout="100ms",
                circuit_breaker={"failure_threshold": 2, "cool_down": "50ms"})
    handler = WebhookHandler([hook])
    [webhook] = handler.webhooks
    with respx.mock(using="httpx") as mock:
        route = mock.post(URL).mock(side_effect=httpx.ConnectError("refused"))
        for _ in range(2):
            await serve(handler, context("CreateContainer"),
                                           request("CreateContainer"))
        assert webhook.breaker.state is CircuitState.OPEN
        await serve(handler, context("CreateContainer"),
                                       request("CreateContainer"))
        assert route.call_count == 2  # skipped while open
        assert handler.metrics.requests.labels(
            "CreateContainer", "policy", "circuit_open")._value.get() == 1
        await asyncio.sleep(0.06)
        route.mock(side_effect=None, return_value=httpx.Response(200, json={}))
        await serve(handler, context("CreateContainer"),
                                       request("CreateContainer"))
        assert route.call_count == 3
        assert webhook.breaker.state is CircuitState.CLOSED


async def test_open_circuit_under_fail_rejects() -> None:
    hook = spec(events=["CreateContainer"], failure_policy="Fail",
                circuit_breaker={"failure_threshold": 1, "cool_down": "10s"})
    handler = WebhookHandler([hook])
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=httpx.ConnectError("refused"))
        with pytest.raises(EventRejected):
            await serve(handler, context("CreateContainer"),
                                           request("CreateContainer"))
        with pytest.raises(EventRejected, match=r"\(circuit_open\): circuit open"):
            await serve(handler, context("CreateContainer"),
                                           request("CreateContainer"))


async def test_schema_violation_does_not_trip_the_breaker() -> None:
    hook = spec(events=["CreateContainer"], circuit_breaker={"failure_threshold": 1})
    handler = WebhookHandler([hook])
    with respx.mock(using="httpx") as mock:
        mock.post(URL).respond(json={"bogus": True})
        for _ in range(3):
            await serve(handler, context("CreateContainer"),
                                           request("CreateContainer"))
    assert handler.webhooks[0].breaker.state is CircuitState.CLOSED


async def test_synchronize_uses_the_webhook_timeout_not_the_runtime_budget() -> None:
    from tests.webhooks.helpers import sync_objects
    hook = spec(events=["Synchronize"], sync_timeout="2s", timeout="100ms")
    handler = WebhookHandler([hook])
    pods, containers = sync_objects()
    cid = containers[0].id

    async def slowish(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.2)
        return httpx.Response(200, json={"update": [
            {"container_id": cid, "linux": {"resources": {"cpu": {"cpus": "1"}}}}]})

    with respx.mock(using="httpx") as mock:
        route = mock.post(URL).mock(side_effect=slowish)
        updates = await serve_sync(handler, context("Synchronize", budget_s=0.05), pods,
                                            containers)
    import json
    assert json.loads(route.calls.last.request.content)["budget_ms"] == 2000
    assert [u.container_id for u in updates] == [cid]
