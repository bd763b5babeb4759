"""The shipped start-up order (policy server first, bridge second) logs no error; real failures
of the bridge's control API still do (docs/operations.md#start-up)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI, Response

from bridge.simulator.runtime import SimulatedRuntime
from policy_server.assemble import Assembly, assemble
from policy_server.service import BRIDGE_START_WAIT_S, ServerOptions
from tests.integration.harness import pod_and_container, running_bridge, short_tmpdir
from tests.policy_server.factory import node_reader
from tests.policy_server.servers import serve_on_uds
from tests.waiting import until

pytestmark = pytest.mark.timeout(90)

WAIT_S = 60.0  # generous ceilings: they only catch a hang on a loaded machine
WAITING = "waiting for the bridge's control socket"
ANSWERED = "the bridge's control API at"
FAILED = "resync failed"


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_tmpdir() as path:
        yield path


def _server(workdir: Path, bridge_start_wait_s: float = BRIDGE_START_WAIT_S) -> Assembly:
    # node_reader: the test reads the server's node view, kept only when a policy reads it.
    return assemble(ServerOptions(bridge_control=f"unix://{workdir}/control.sock",
                                  rules_poll_interval_s=0.05,
                                  bridge_start_wait_s=bridge_start_wait_s),
                    extra_policies=[node_reader()])


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith(text)]


def _loud(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.levelname} {r.name}: {r.getMessage()}" for r in caplog.records
            if r.levelno >= logging.WARNING]


async def test_policy_server_started_before_the_bridge_logs_no_error(
        workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    runtime = SimulatedRuntime(workdir / "nri.sock", "containerd-2.1.9")
    pod, container = pod_and_container("started-before-us")
    runtime.state.seed([pod], [container])
    await runtime.start()
    assembly = _server(workdir)
    try:
        async with serve_on_uds(assembly.app, workdir / "policy.sock"):
            # The start-up resync found no control socket and said so, once, at INFO.
            await until(lambda: bool(_logged(caplog, WAITING)), what="the bridge logs WAITING",
                    timeout_s=WAIT_S)
            assert not (workdir / "control.sock").exists()
            async with running_bridge(runtime, [], workdir):
                await until(lambda: bool(_logged(caplog, ANSWERED)),
                            what="the bridge logs ANSWERED",
                    timeout_s=WAIT_S)
                # It resynced from the bridge's state: the runtime's pod is in its node view.
                assert pod.id in assembly.server.engine.node.pods
                assert container.id in assembly.server.engine.node.containers
    finally:
        await runtime.stop()
    assert [r.levelname for r in _logged(caplog, WAITING)] == ["INFO"]
    assert _loud(caplog) == []


async def test_a_bad_reply_from_the_bridge_is_still_an_error(
        workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    broken = FastAPI()

    @broken.get("/readyz")
    async def readyz() -> dict[str, bool]:
        return {"ready": True}  # synchronized with its runtime; its state route is what broke

    @broken.get("/v1/state")
    async def state() -> Response:
        return Response("bridge broke", status_code=500)

    assembly = _server(workdir)
    async with serve_on_uds(broken, workdir / "control.sock"), \
            serve_on_uds(assembly.app, workdir / "policy.sock"):
        await until(lambda: bool(_logged(caplog, FAILED)), what="the bridge logs FAILED",
                    timeout_s=WAIT_S)
    failed = _logged(caplog, FAILED)[0]
    assert failed.levelno == logging.ERROR
    assert "HTTP 500" in failed.getMessage()
    assert _logged(caplog, WAITING) == []


async def test_a_bridge_that_never_comes_is_an_error_after_the_start_wait(
        workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assembly = _server(workdir, bridge_start_wait_s=0.0)
    async with serve_on_uds(assembly.app, workdir / "policy.sock"):
        await until(lambda: bool(_logged(caplog, FAILED)), what="the bridge logs FAILED",
                    timeout_s=WAIT_S)
    failed = _logged(caplog, FAILED)[0]
    assert failed.levelno == logging.ERROR
    assert "No such file or directory" in failed.getMessage()
    assert "no bridge control socket 0s after start-up" in failed.getMessage()
