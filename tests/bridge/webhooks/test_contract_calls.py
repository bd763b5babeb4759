"""Contract tests: what the handler sends for every event and what it makes of replies.

The policy is a real HTTP double (tests/bridge/webhooks/policy_double.py) on a Unix socket.
"""

from __future__ import annotations

from typing import Any

import pytest

from bridge.contract.webhook_models import EVENT_NAMES
from bridge.nri.handler_api import EventRejected
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.webhook_handler import WebhookHandler
from tests.bridge.webhooks.helpers import (
    CREATED_ID,
    EXAMPLES,
    SCHEMAS,
    context,
    example,
    request,
    spec,
    sync_objects,
)
from tests.bridge.webhooks.policy_double import Reply, policy_double
from tests.event_path import serve, serve_sync
from tests.json_schemas import validate


async def _deliver(handler: WebhookHandler, event: str, budget_s: float = 1.9) -> Any:
    ctx = context(event, budget_s)
    if event == "Synchronize":
        pods, containers = sync_objects()
        return await serve_sync(handler, ctx, pods, containers)
    return await serve(handler, ctx, request(event))


@pytest.mark.parametrize("event", EVENT_NAMES)
async def test_every_event_sends_a_valid_envelope(event: str) -> None:
    reply_file = EXAMPLES / f"{event}.reply.json"
    reply = example(reply_file.name) if reply_file.exists() and event != "RunPodSandbox" else {}
    async with policy_double() as double:
        route = double.route("/v1/policy", Reply(json=reply))
        handler = WebhookHandler([spec(events=[event], timeout="800ms", sock=double.sock)],
                                 knows_container=lambda _: True)
        result = await _deliver(handler, event)
        await handler.aclose()
    sent = route.calls[-1].json()
    validate(sent, SCHEMAS / f"{event}.request.schema.json")
    assert sent["event"] == event and sent["dry_run"] is False
    assert 0 < sent["budget_ms"] <= 800
    runtime = sent["runtime"]
    assert (runtime["name"], runtime["version"], runtime["nri_version"]) == (
        "containerd", "2.1.9", "v0.8.0")
    # NRI v0.8.0 applies pids and CDI devices (v0.7), not args/namespaces (v0.10) or sysctl.
    assert {"linux.resources.pids", "CDI_devices", "env"} <= set(runtime["capabilities"])
    assert not {"args", "linux.namespaces", "linux.sysctl"} & set(runtime["capabilities"])
    assert route.calls[-1].headers["Content-Type"] == "application/json"
    if event == "CreateContainer":
        assert isinstance(result, api.CreateContainerResponse)
        assert [(e.key, e.value) for e in result.adjust.env] == [
            ("POLICY", "applied"), ("-HTTP_PROXY", "")]
        assert result.adjust.linux.resources.cpu.cpus == "2-3"
        assert result.adjust.linux.oom_score_adj.value == 100
    elif event == "UpdateContainer":
        assert isinstance(result, api.UpdateContainerResponse)
        assert result.update[0].linux.resources.cpu.shares.value == 768
    elif event == "Synchronize":
        assert [u.ignore_failure for u in result] == [True]
        assert result[0].linux.resources.cpu.cpus == "2-3"
    else:
        assert result is None


async def _one(reply: Reply, event: str, **kw: Any) -> tuple[Any, Any, WebhookHandler]:
    """Deliver `event` to one webhook whose policy answers `reply`: (result, route, handler)."""
    async with policy_double() as double:
        route = double.route("/v1/policy", reply)
        handler = WebhookHandler([spec(sock=double.sock, **kw)])
        try:
            return await _deliver(handler, event), route, handler
        finally:
            await handler.aclose()


async def test_reject_fails_the_operation_whatever_the_failure_policy() -> None:
    with pytest.raises(EventRejected, match='webhook "policy" rejected RunPodSandbox: '
                       "namespace default may not run privileged pods") as caught:
        await _one(Reply(json=example("RunPodSandbox.reply.json")), "RunPodSandbox",
                   events=["RunPodSandbox"], failure_policy="Ignore")
    assert caught.value.reason.startswith('webhook "policy" rejected')


async def test_validator_reject_becomes_event_rejected() -> None:
    with pytest.raises(EventRejected, match="no env injection"):
        await _one(Reply(json={"reject": {"reason": "no env injection"}}),
                   "ValidateContainerAdjustment", events=["ValidateContainerAdjustment"])


async def test_selector_miss_makes_no_call() -> None:
    result, route, _ = await _one(Reply(json={}), "CreateContainer",
                                  events=["CreateContainer"], namespaces=["kube-system"])
    assert result is None
    assert not route.called


async def test_selectors_choose_webhooks_per_pod() -> None:
    async with policy_double() as double:
        routes = {p: double.route(p, Reply(json={})) for p in ("/a", "/b", "/c", "/d")}
        hooks = [
            spec("by-label", "/a", sock=double.sock, events=["CreateContainer"],
                 pod_label_selector={
                     "matchLabels": {"app": "demo"},
                     "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
            spec("by-annotation", "/b", sock=double.sock, events=["CreateContainer"],
                 annotations={"demo/purpose": ["cri-demo", "other"]}),
            spec("by-handler", "/c", sock=double.sock, events=["CreateContainer"],
                 runtime_handlers=["kata"]),
            spec("excluded", "/d", sock=double.sock, events=["CreateContainer"],
                 exclude_namespaces=["default"]),
        ]
        handler = WebhookHandler(hooks)
        await _deliver(handler, "CreateContainer")
        await handler.aclose()
    assert {p: r.called for p, r in routes.items()} == {
        "/a": True, "/b": True, "/c": False, "/d": False}


async def test_shadow_mode_calls_with_dry_run_and_applies_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="bridge.webhooks.webhook_handler"):
        result, route, _ = await _one(Reply(json=example("CreateContainer.reply.json")),
                                      "CreateContainer", events=["CreateContainer"],
                                      mode="shadow")
    assert result is None
    assert route.calls[-1].json()["dry_run"] is True
    line = next(r for r in caplog.records if r.getMessage() == "shadow webhook call")
    assert line.outcome == "shadow_ok"  # type: ignore[attr-defined]
    assert '"POLICY"' in line.would_adjust  # type: ignore[attr-defined]


async def test_shadow_reject_and_failure_are_only_logged() -> None:
    for reply in (Reply(json=example("RunPodSandbox.reply.json")), Reply(500)):
        result, route, _ = await _one(reply, "RunPodSandbox", events=["RunPodSandbox"],
                                      mode="shadow", failure_policy="Fail")
        assert result is None
        assert route.called


async def test_evictions_are_accepted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO"):
        result, _, _ = await _one(
            Reply(json={"evict": [{"container_id": CREATED_ID, "reason": "pressure"}]}),
            "UpdateContainer", events=["UpdateContainer"])
    assert result is None
    assert any("eviction requested" in r.getMessage() for r in caplog.records)


async def test_bearer_token_and_tls_settings_reach_the_request(tmp_path: Any) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    _, route, _ = await _one(Reply(json={}), "CreateContainer", events=["CreateContainer"],
                             bearer_token_file=str(token))
    assert route.calls[-1].headers["Authorization"] == "Bearer s3cret"


async def test_tcp_url_posts_to_its_path() -> None:
    from bridge.webhooks.specs import parse_webhooks
    async with policy_double(tcp=True) as double:
        route = double.route("/hooks/qos?v=1", Reply(json={}))
        hook = parse_webhooks([{"name": "tcp",
                                "url": f"http://127.0.0.1:{double.port}/hooks/qos?v=1",
                                "events": ["CreateContainer"]}])[0]
        handler = WebhookHandler([hook])
        await _deliver(handler, "CreateContainer")
        await handler.aclose()
    assert route.called


async def test_no_content_reply_means_no_change() -> None:
    result, route, handler = await _one(Reply(204), "CreateContainer",
                                        events=["CreateContainer"])
    assert result is None and route.called
    assert handler.metrics.requests.labels("CreateContainer", "policy",
                                           "no_change")._value.get() == 1
