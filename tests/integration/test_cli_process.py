"""The real CLI process: `python -m bridge run --policy-url ...` against the simulator."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from bridge.simulator.runtime import SimulatedRuntime
from tests.integration.harness import pod_and_container, short_tmpdir
from tests.integration.policy_app import Knobs, serve_policy
from tests.waiting import path_exists, until

pytestmark = pytest.mark.timeout(40)
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.processes
async def test_cli_bridge_process_end_to_end() -> None:
    knobs = Knobs(replies={"CreateContainer": {"adjust": {
        "env": [{"key": "FROM_CLI", "value": "yes"}]}}})
    with short_tmpdir() as work:
        rt = SimulatedRuntime(work / "nri.sock", "containerd-1.7.24", request_timeout_s=2.0)
        await rt.start()
        log_path = work / "bridge.log"
        proc = None
        try:
            async with serve_policy(str(work / "policy.sock"), knobs):
                with log_path.open("wb") as log:
                    proc = await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "bridge", "run",
                        "--nri-socket", str(work / "nri.sock"),
                        "--policy-url", f"unix://{work}/policy.sock/v1/policy",
                        "--control-socket", str(work / "control.sock"),
                        "--plugin-name", "cli-bridge", "--plugin-index", "40",
                        "--log-format", "json",
                        cwd=REPO, stdin=asyncio.subprocess.DEVNULL,
                        stdout=asyncio.subprocess.DEVNULL, stderr=log,
                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
                await rt.wait_plugin(15.0)
                await until(path_exists(work / "control.sock"), what="the control socket appears",
                            timeout_s=5.0, in_thread=True)
                result = await rt.create_container(*pod_and_container())
                transport = httpx.AsyncHTTPTransport(uds=str(work / "control.sock"))
                async with httpx.AsyncClient(transport=transport, base_url="http://bridge",
                                             timeout=5) as client:
                    ready = await client.get("/readyz")
                proc.send_signal(signal.SIGTERM)
                async with asyncio.timeout(10):
                    code = await proc.wait()
        finally:
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
            await rt.stop()
        lines = [json.loads(line) for line in log_path.read_text().splitlines()
                 if line.startswith("{")]
    assert result.ok, result.error
    assert result.container is not None and "FROM_CLI=yes" in result.container.env
    assert ready.status_code == 200
    assert code == 0
    assert rt.closed_plugins == []
    calls = [line for line in lines if line["msg"] == "webhook call"]
    # The (empty) Synchronize at registration is sent too, then the container's event.
    assert [c["event"] for c in calls] == ["Synchronize", "CreateContainer"]
    call = calls[1]
    assert call["webhook"] == "policy"
    assert call["outcome"] == "ok" and call["pod"].startswith("default/")
    assert call["container"] == "ctr-0" and isinstance(call["latency_ms"], float)
    assert call["uid"]


def test_cli_refuses_bad_policy_url_with_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from bridge.cli import main
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        assert main(["run", "--policy-url", "http://10.1.2.3/policy"]) == 2
    finally:
        root.handlers[:], root.level = handlers, level  # `run` set up logging for itself
    err = capsys.readouterr().err
    assert "--policy-url: plain http to non-loopback host '10.1.2.3'" in err
