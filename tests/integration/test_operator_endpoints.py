"""The operator's view of a running pair: metrics listeners and JSON log lines.

Both programs run as real processes (the installed console scripts) against the
runtime simulator: the bridge calls the real nri-policy-server's koordinator-qos
policy over a Unix socket, each has `--metrics-address` on a loopback port and
`--log-format json`. Prometheus' view (GET /metrics over TCP, nothing else
reachable there) and the log pipeline's (every line one JSON object of the same
shape from both programs) are checked on what they really wrote.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge.simulator.runtime import SimulatedRuntime
from tests.integration.harness import pod_and_container, short_tmpdir
from tests.waiting import log_tail, path_exists, until

pytestmark = pytest.mark.timeout(60)
BIN = Path(sys.executable).parent
START_TIMEOUT_S = 15.0
# The shape both programs promise (bridge.process_setup.logformat): these keys first, in order.
HEAD = ["ts", "level", "logger", "msg"]
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def _process(argv: list[str], log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            str(BIN / argv[0]), *argv[1:], stdin=asyncio.subprocess.DEVNULL,
            stdout=out, stderr=out, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _stop(proc: asyncio.subprocess.Process) -> int:
    proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(10):
        return await proc.wait()


def _json_lines(log: Path) -> list[dict[str, Any]]:
    lines = log.read_text().splitlines()
    assert lines, f"{log.name} is empty"
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"{log.name}: not a JSON line: {line!r}") from None
    return records


@pytest.mark.processes
async def test_metrics_listeners_and_json_logs_of_both_programs() -> None:
    bridge_port, policy_port = _free_port(), _free_port()
    with short_tmpdir() as work:
        policy_log, bridge_log = work / "policy.log", work / "bridge.log"
        rt = SimulatedRuntime(work / "nri.sock", "containerd-2.1.9", request_timeout_s=2.0)
        await rt.start()
        try:
            async with _process(["nri-policy-server", "--uds", str(work / "policy.sock"),
                                 "--metrics-address", f"127.0.0.1:{policy_port}",
                                 "--log-format", "json"], policy_log) as policy:
                await until(path_exists(work / "policy.sock"), what="the policy socket appears",
                            timeout_s=START_TIMEOUT_S, proc=policy, details=log_tail(policy_log),
                            in_thread=True)
                async with _process(
                        ["nri-webhook-bridge", "run", "--nri-socket", str(work / "nri.sock"),
                         "--policy-url",
                         f"unix://{work}/policy.sock/v1/policies/koordinator-qos",
                         "--control-socket", str(work / "control.sock"),
                         "--metrics-address", f"127.0.0.1:{bridge_port}",
                         "--log-format", "json"], bridge_log) as bridge:
                    await rt.wait_plugin(START_TIMEOUT_S)
                    result = await rt.create_container(*pod_and_container())
                    assert result.ok, result.error
                    async with httpx.AsyncClient(timeout=5) as client:
                        replies = {
                            (port, method, path): await client.request(
                                method, f"http://127.0.0.1:{port}{path}")
                            for port in (bridge_port, policy_port)
                            for method, path in (("GET", "/metrics"), ("GET", "/healthz"),
                                                 ("GET", "/v1/state"), ("POST", "/v1/updates"),
                                                 ("POST", "/v1/policies/koordinator-qos"))}
                    assert await _stop(bridge) == 0
                assert await _stop(policy) == 0
            async with httpx.AsyncClient(timeout=2) as client:
                for port in (bridge_port, policy_port):  # the listeners went with them
                    with pytest.raises(httpx.ConnectError):
                        await client.get(f"http://127.0.0.1:{port}/metrics")
        finally:
            await rt.stop()
        bridge_lines, policy_lines = _json_lines(bridge_log), _json_lines(policy_log)

    # Prometheus gets the text format on GET /metrics, and nothing else answers there.
    for (port, method, path), reply in replies.items():
        if (method, path) == ("GET", "/metrics"):
            assert reply.status_code == 200
            assert reply.headers["content-type"].startswith("text/plain")
        else:
            assert reply.status_code == 404, (port, method, path, reply.status_code)
    families = {port: {f.name: f for f in text_string_to_metric_families(
        replies[(port, "GET", "/metrics")].text)} for port in (bridge_port, policy_port)}
    events = families[bridge_port]["nri_webhook_bridge_events"].samples
    assert {s.labels["event"] for s in events} >= {"CreateContainer"}
    requests = families[policy_port]["policy_requests"].samples
    assert {(s.labels["policy"], s.labels["event"]) for s in requests} >= {
        ("koordinator-qos", "CreateContainer")}

    # One line shape for both programs, uvicorn's own lines included.
    for records in (bridge_lines, policy_lines):
        for record in records:
            assert list(record)[:4] == HEAD, record
            assert TS.match(record["ts"]) and record["level"] in {
                "debug", "info", "warning", "error", "critical"}, record
    assert any(r["logger"].startswith("uvicorn") for r in policy_lines)
    assert any(f"127.0.0.1:{policy_port}" in r["msg"] for r in policy_lines)
    started = next(r for r in bridge_lines if r["msg"] == "starting")
    assert f"http://127.0.0.1:{bridge_port}/metrics" in started["control"]
    assert any(r["msg"] == "webhook call" and r["outcome"] in {"ok", "no_change"}
               for r in bridge_lines)


@pytest.fixture
def restore_logging() -> Any:
    """`main` installs its own root handler; put pytest's back afterwards."""
    import logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


def test_a_metrics_port_in_use_stops_either_program_with_a_clear_error(
        restore_logging: None, capsys: pytest.CaptureFixture[str]) -> None:
    from bridge.cli import main as bridge_main
    from policy_server.main import main as policy_main

    with short_tmpdir() as work, socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        assert policy_main(["--uds", str(work / "p.sock"), "--metrics-address", address]) == 2
        err = capsys.readouterr().err
        assert f"cannot listen on {address}" in err
        assert not (work / "p.sock").exists(), "the policy socket is removed again"
        assert policy_main(["--uds", str(work / "p.sock"), "--metrics-address", "9465"]) == 2
        assert "--metrics-address: expected HOST:PORT, got '9465'" in capsys.readouterr().err
        assert bridge_main(["run", "--nri-socket", str(work / "nri.sock"),
                            "--control-socket", str(work / "c.sock"),
                            "--metrics-address", address]) == 1
        err = capsys.readouterr().err
        assert "cannot start the metrics listener (--metrics-address)" in err
        assert f"cannot listen on {address}" in err
        assert not (work / "c.sock").exists(), "the control socket is removed again"
