"""Rule changes reach running containers: recompute from the bridge's state, push updates."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from policy_server.bridge_link.control_client import BridgeControl
from policy_server.policies.koordinator_qos.rules_watcher import ReloadResult
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.factory import container, koordinator_of, pod, poll_rules

POOLS = "node.koordinator.sh/cpu-shared-pools"


class FakeBridge:
    """The bridge's control API as an httpx MockTransport."""

    def __init__(self) -> None:
        self.pods = [pod(pod_id="p1", qos="LS"), pod(pod_id="p2", uid="u2", qos="LS")]
        self.containers = [container(cid="c1", pod_id="p1", cpu={"cpus": "0-7"}),
                           container(cid="c2", pod_id="p2", cpu={"cpus": "0-3"})]
        self.pushed: list[list[dict[str, Any]]] = []
        self.down = False
        self.ready = True  # synchronized with its runtime
        self.fetched = 0  # GET /v1/state calls

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("bridge down")
        if request.url.path == "/readyz":
            return httpx.Response(200 if self.ready else 503, json={"ready": self.ready})
        if request.url.path == "/v1/state":
            self.fetched += 1
            return httpx.Response(200, json={"pods": self.pods, "containers": self.containers})
        updates = json.loads(request.content)["update"]
        self.pushed.append(updates)
        return httpx.Response(200, json={"failed": []})


def make(tmp_path: Path, rules: str) -> tuple[PolicyServer, FakeBridge, Path]:
    path = tmp_path / "rules.yaml"
    path.write_text(rules)
    fake = FakeBridge()
    bridge = BridgeControl("http://bridge", transport=httpx.MockTransport(fake.handle))
    server = PolicyServer(ServerOptions(rules_path=path, bridge_control="http://bridge"),
                          bridge=bridge)
    return server, fake, path


def change(path: Path, text: str) -> None:
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


async def test_rule_change_pushes_only_changed_containers(tmp_path: Path) -> None:
    server, fake, path = make(tmp_path, f"topology: {{{POOLS}: [{{cpuset: '0-7'}}]}}\n")
    change(path, f"topology: {{{POOLS}: [{{cpuset: '0-3'}}]}}\n")
    result = await poll_rules(server)
    assert result is ReloadResult.APPLIED
    # c2 already has 0-3; only c1 changes.
    assert fake.pushed == [[{"container_id": "c1",
                             "linux": {"resources": {"cpu": {"cpus": "0-3"}}}}]]
    metrics = server.metrics.render().decode()
    assert "policy_pushed_updates_total 1.0" in metrics
    assert 'policy_resyncs_total{result="ok"} 1.0' in metrics
    assert "policy_rules_generation 2.0" in metrics


async def test_invalid_change_pushes_nothing(tmp_path: Path) -> None:
    server, fake, path = make(tmp_path, f"topology: {{{POOLS}: [{{cpuset: '0-7'}}]}}\n")
    change(path, "topology: {oops: 1}\n")
    await poll_rules(server)
    assert fake.pushed == []
    error = koordinator_of(server).rules.last_error
    assert error is not None and "topology.oops" in error
    assert "policy_rules_last_load_valid 0.0" in server.metrics.render().decode()


async def test_bridge_down_retries_with_backoff(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server, fake, path = make(tmp_path, "")
    assert await server.resync.run_pass() is True  # the bridge answered once ...
    fake.down = True  # ... and then its control socket went away: an error, not a wait
    change(path, f"topology: {{{POOLS}: [{{cpuset: '0-3'}}]}}\n")
    with caplog.at_level(logging.INFO):
        await poll_rules(server)
    assert 'policy_resyncs_total{result="failed"} 1.0' in server.metrics.render().decode()
    [failed] = [r for r in caplog.records if "resync failed" in r.getMessage()]
    assert failed.levelno == logging.ERROR
    assert "worked before" in failed.getMessage()
    await server.resync.on_poll(ReloadResult.UNCHANGED)  # too early: back-off not over
    assert 'result="failed"} 1.0' in server.metrics.render().decode()
    fake.down = False
    assert await server.resync.run_pass() is True
    assert fake.pushed and fake.pushed[0][0]["container_id"] == "c1"


async def test_a_bridge_not_up_yet_is_waited_for_quietly(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server, fake, _ = make(tmp_path, "")
    fake.down = True  # started before the bridge: its control socket refuses connections
    with caplog.at_level(logging.DEBUG, logger="policy_server"):
        assert await server.resync.run_pass() is False
        assert await server.resync.run_pass() is False
        fake.down = False
        assert await server.resync.run_pass() is True
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in said if level not in ("INFO", "DEBUG")] == []
    waiting = [level for level, msg in said
               if msg.startswith("waiting for the bridge's control socket")]
    assert waiting == ["INFO"]  # once; the retries after it at DEBUG
    assert any("still waiting" in msg for level, msg in said if level == "DEBUG")
    assert any("answered; resynced" in msg for level, msg in said if level == "INFO")
    metrics = server.metrics.render().decode()
    assert 'policy_resyncs_total{result="waiting"} 2.0' in metrics
    assert 'result="failed"' not in metrics


async def test_a_bridge_not_synchronized_yet_is_waited_for_without_a_pass(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Issue 27: a pass while the bridge answers the runtime's Synchronize reads a state about to
    # change and competes with the Synchronize for the CPU; before it the state is empty.
    server, fake, _ = make(tmp_path, f"topology: {{{POOLS}: [{{cpuset: '0-3'}}]}}\n")
    fake.ready = False
    with caplog.at_level(logging.DEBUG, logger="policy_server"):
        assert await server.resync.run_pass() is False
        assert await server.resync.run_pass() is False
        assert fake.fetched == 0 and fake.pushed == []  # the state was not even fetched
        server.resync.schedule = replace(server.resync.schedule, periodic=True)
        assert await server.resync.run_pass(full=False) is False  # a periodic pass waits its turn
        assert server.resync.schedule.periodic is False and server.resync.schedule.pending
        fake.ready = True
        assert await server.resync.run_pass() is True
    assert fake.fetched == 1
    assert fake.pushed == [[{"container_id": "c1",
                             "linux": {"resources": {"cpu": {"cpus": "0-3"}}}}]]
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    unsynced = [level for level, msg in said if "has not synchronized" in msg]
    assert unsynced == ["INFO", "DEBUG", "DEBUG"]  # said once, then quietly
    metrics = server.metrics.render().decode()
    assert 'policy_resyncs_total{result="waiting"} 3.0' in metrics
    assert 'policy_resyncs_total{result="ok"} 1.0' in metrics


async def test_no_bridge_means_no_push(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("")
    server = PolicyServer(ServerOptions(rules_path=path))
    assert await server.resync.run_pass() is True


async def test_large_pushes_are_batched(tmp_path: Path) -> None:
    server, fake, path = make(tmp_path, f"topology: {{{POOLS}: [{{cpuset: '0-7'}}]}}\n")
    fake.containers = [container(cid=f"c{i}", pod_id="p1", cpu={"cpus": "0-7"})
                       for i in range(1200)]
    change(path, f"topology: {{{POOLS}: [{{cpuset: '0-3'}}]}}\n")
    await poll_rules(server)
    assert [len(batch) for batch in fake.pushed] == [500, 500, 200]
