"""respx contract tests: what the handler sends for every event and what it makes of replies."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest
import respx

from bridge.contract.webhook_models import EVENT_NAMES
from bridge.nri.handler_api import EventRejected
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.fanout import WebhookHandler
from tests.event_path import serve, serve_sync
from tests.webhooks.helpers import (
    BASE,
    CREATED_ID,
    EXAMPLES,
    context,
    example,
    request,
    schema,
    spec,
    sync_objects,
)


async def _deliver(handler: WebhookHandler, event: str, budget_s: float = 1.9) -> Any:
    ctx = context(event, budget_s)
    if event == "Synchronize":
        pods, containers = sync_objects()
        return await serve_sync(handler, ctx, pods, containers)
    return await serve(handler, ctx, request(event))


@pytest.mark.parametrize("event", EVENT_NAMES)
async def test_every_event_sends_a_valid_envelope(event: str) -> None:
    handler = WebhookHandler([spec(events=[event], timeout="800ms")],
                             knows_container=lambda _: True)
    reply_file = EXAMPLES / f"{event}.reply.json"
    reply = example(reply_file.name) if reply_file.exists() and event != "RunPodSandbox" else {}
    with respx.mock(using="httpx", assert_all_called=True) as mock:
        route = mock.post(f"{BASE}/v1/policy").respond(json=reply)
        result = await _deliver(handler, event)
    sent = json.loads(route.calls.last.request.content)
    jsonschema.validate(sent, schema(f"{event}.request.schema.json"))
    assert sent["event"] == event and sent["dry_run"] is False
    assert 0 < sent["budget_ms"] <= 800
    runtime = sent["runtime"]
    assert (runtime["name"], runtime["version"], runtime["nri_version"]) == (
        "containerd", "2.1.9", "v0.8.0")
    # NRI v0.8.0 applies pids and CDI devices (v0.7), not args/namespaces (v0.10) or sysctl.
    assert {"linux.resources.pids", "CDI_devices", "env"} <= set(runtime["capabilities"])
    assert not {"args", "linux.namespaces", "linux.sysctl"} & set(runtime["capabilities"])
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
    await handler.aclose()


async def test_reject_fails_the_operation_whatever_the_failure_policy() -> None:
    handler = WebhookHandler([spec(events=["RunPodSandbox"], failure_policy="Ignore")])
    with respx.mock(using="httpx") as mock:
        mock.post(f"{BASE}/v1/policy").respond(json=example("RunPodSandbox.reply.json"))
        with pytest.raises(EventRejected, match='webhook "policy" rejected RunPodSandbox: '
                           "namespace default may not run privileged pods"):
            await _deliver(handler, "RunPodSandbox")
    assert handler.metrics.rejections.labels("RunPodSandbox", "policy")._value.get() == 1


async def test_validator_reject_becomes_event_rejected() -> None:
    handler = WebhookHandler([spec(events=["ValidateContainerAdjustment"])])
    with respx.mock(using="httpx") as mock:
        mock.post(f"{BASE}/v1/policy").respond(json={"reject": {"reason": "no env injection"}})
        with pytest.raises(EventRejected, match="no env injection"):
            await _deliver(handler, "ValidateContainerAdjustment")


async def test_selector_miss_makes_no_call() -> None:
    handler = WebhookHandler([spec(events=["CreateContainer"], namespaces=["kube-system"])])
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(f"{BASE}/v1/policy").respond(json={})
        assert await _deliver(handler, "CreateContainer") is None
    assert not route.called


async def test_selectors_choose_webhooks_per_pod() -> None:
    hooks = [
        spec("by-label", "/a", events=["CreateContainer"],
             pod_label_selector={
                 "matchLabels": {"app": "demo"},
                 "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
        spec("by-annotation", "/b", events=["CreateContainer"],
             annotations={"demo/purpose": ["cri-demo", "other"]}),
        spec("by-handler", "/c", events=["CreateContainer"], runtime_handlers=["kata"]),
        spec("excluded", "/d", events=["CreateContainer"], exclude_namespaces=["default"]),
    ]
    handler = WebhookHandler(hooks)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        routes = {p: mock.post(f"{BASE}{p}").respond(json={}) for p in ("/a", "/b", "/c", "/d")}
        await _deliver(handler, "CreateContainer")
    assert {p: r.called for p, r in routes.items()} == {
        "/a": True, "/b": True, "/c": False, "/d": False}


async def test_shadow_mode_calls_with_dry_run_and_applies_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    handler = WebhookHandler([spec(events=["CreateContainer"], mode="shadow")])
    with respx.mock(using="httpx") as mock:
        route = mock.post(f"{BASE}/v1/policy").respond(json=example("CreateContainer.reply.json"))
        with caplog.at_level("INFO", logger="bridge.webhooks.fanout"):
            assert await _deliver(handler, "CreateContainer") is None
    assert json.loads(route.calls.last.request.content)["dry_run"] is True
    line = next(r for r in caplog.records if r.getMessage() == "shadow webhook call")
    assert line.outcome == "shadow_ok"  # type: ignore[attr-defined]
    assert '"POLICY"' in line.would_adjust  # type: ignore[attr-defined]


async def test_shadow_reject_and_failure_are_only_logged() -> None:
    handler = WebhookHandler([spec(events=["RunPodSandbox"], mode="shadow", failure_policy="Fail")])
    with respx.mock(using="httpx") as mock:
        route = mock.post(f"{BASE}/v1/policy")
        route.respond(json=example("RunPodSandbox.reply.json"))
        assert await _deliver(handler, "RunPodSandbox") is None
        route.respond(status_code=500)
        assert await _deliver(handler, "RunPodSandbox") is None


async def test_evictions_are_accepted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    handler = WebhookHandler([spec(events=["UpdateContainer"])])
    with respx.mock(using="httpx") as mock:
        mock.post(f"{BASE}/v1/policy").respond(
            json={"evict": [{"container_id": CREATED_ID, "reason": "pressure"}]})
        with caplog.at_level("INFO"):
            assert await _deliver(handler, "UpdateContainer") is None
    assert any("eviction requested" in r.getMessage() for r in caplog.records)


async def test_bearer_token_and_tls_settings_reach_the_request(tmp_path: Any) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    hook = spec(events=["CreateContainer"], bearer_token_file=str(token))
    handler = WebhookHandler([hook])
    with respx.mock(using="httpx") as mock:
        route = mock.post(f"{BASE}/v1/policy").respond(json={})
        await _deliver(handler, "CreateContainer")
    assert route.calls.last.request.headers["authorization"] == "Bearer s3cret"


async def test_tcp_url_posts_to_its_path() -> None:
    from bridge.webhooks.config import parse_webhooks
    hook = parse_webhooks([{"name": "tcp", "url": "http://127.0.0.1:8080/hooks/qos?v=1",
                            "events": ["CreateContainer"]}])[0]
    handler = WebhookHandler([hook])
    with respx.mock(using="httpx") as mock:
        route = mock.post("http://127.0.0.1:8080/hooks/qos?v=1").respond(json={})
        await _deliver(handler, "CreateContainer")
    assert route.called


async def test_no_content_reply_means_no_change() -> None:
    handler = WebhookHandler([spec(events=["CreateContainer"])])
    with respx.mock(using="httpx") as mock:
        mock.post(f"{BASE}/v1/policy").mock(return_value=httpx.Response(204))
        assert await _deliver(handler, "CreateContainer") is None
