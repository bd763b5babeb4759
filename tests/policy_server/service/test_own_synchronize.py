"""The server's own Synchronize (the resync, the node reconciler) goes through the settle step.

Its updates and its pushes both leave through the bridge (the reconciler used to drop a
decision's ``push``), its warnings are logged as the settled reply's, and the bridge's state is
decoded from the bytes the bridge sent, never encoded again first (it used to be decoded,
encoded with orjson and decoded again). The bridge's control API is an httpx MockTransport, as
in the other resync tests.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest

from policy_server import ContainerUpdate, Decision, Event, EventName, Policy, ResourcePatch
from policy_server.bridge_link.control_client import BridgeControl
from policy_server.engine import request as request_module
from policy_server.sdk.node_plan import NO_PLAN, NodePlan
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.factory import container, pod


class Bridge:
    def __init__(self) -> None:
        self.pods = [pod(pod_id="p1", qos="LS")]
        self.containers = [container(cid="c1", pod_id="p1", cpu={"cpus": "0-7"}),
                           container(cid="c2", pod_id="p1", cpu={"cpus": "0-7"})]
        self.pushed: list[list[dict[str, Any]]] = []
        self.state_bytes = b""

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/readyz":
            return httpx.Response(200, json={"ready": True})
        if request.url.path == "/v1/state":
            self.state_bytes = orjson.dumps({"pods": self.pods, "containers": self.containers})
            return httpx.Response(200, content=self.state_bytes)
        self.pushed.append(json.loads(request.content)["update"])
        return httpx.Response(200, json={"failed": []})


def _policy(reconciled: bool) -> Policy[None]:
    """Updates c1 and pushes c2 at every Synchronize, with a warning."""
    policy = Policy("own")

    @policy.on(EventName.SYNCHRONIZE)
    def sync(event: Event) -> Decision:
        return Decision(update=(ContainerUpdate("c1", ResourcePatch(cpu_cpus="0-3")),),
                        push=(ContainerUpdate("c2", ResourcePatch(cpu_cpus="4-7")),),
                        warnings=(f"seen {len(event.containers)} containers",))

    if reconciled:
        @policy.reconcile
        def plan(event: Event) -> NodePlan:
            return NO_PLAN

    return policy


def _server(tmp_path: Path, reconciled: bool) -> tuple[PolicyServer, Bridge]:
    fake = Bridge()
    bridge = BridgeControl("http://bridge", transport=httpx.MockTransport(fake.handle))
    options = ServerOptions(default_policies=False, bridge_control="http://bridge",
                            cgroup_root=tmp_path)
    return PolicyServer(options, [_policy(reconciled)], bridge=bridge), fake


def _no_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request decoder may decode JSON, never encode it."""
    def encode(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("the bridge's state was encoded again")

    monkeypatch.setattr(request_module, "orjson",
                        SimpleNamespace(dumps=encode, loads=orjson.loads))


WANTED = [{"container_id": "c1", "linux": {"resources": {"cpu": {"cpus": "0-3"}}}},
          {"container_id": "c2", "linux": {"resources": {"cpu": {"cpus": "4-7"}}}}]


@pytest.mark.parametrize("reconciled", [False, True], ids=["resync", "reconciler"])
async def test_the_servers_own_synchronize_pushes_its_updates_and_pushes_decoded_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        reconciled: bool) -> None:
    server, fake = _server(tmp_path, reconciled)
    _no_encoding(monkeypatch)
    caplog.set_level(logging.WARNING)
    try:
        assert await server.resync.run_pass()
    finally:
        await server.aclose()
    assert [u for batch in fake.pushed for u in batch] == WANTED
    source = "reconcile" if reconciled else "resync"
    assert f"{source} policy=own: seen 2 containers" in caplog.text
    metrics = server.metrics.render().decode()
    assert 'policy_requests_total{event="Synchronize",outcome="ok",policy="own"} 1.0' in metrics


async def test_the_state_bytes_are_the_synchronizes_body(tmp_path: Path) -> None:
    """The Synchronize a policy reads as its body is the bridge's bytes, as sent."""
    fake = Bridge()
    bridge = BridgeControl("http://bridge", transport=httpx.MockTransport(fake.handle))
    snapshot = await bridge.state()
    await bridge.aclose()
    sync = request_module.node_synchronize("resync", snapshot.pods, snapshot.containers,
                                           snapshot.raw)
    assert snapshot.raw == fake.state_bytes and sync.event.body == fake.state_bytes
    assert [c.id for c in sync.event.containers] == ["c1", "c2"] and not sync.skipped
