"""A plugin launched by the runtime (pre-registered mode, docs/protocol.md#launched-plugins): socket
on fd 3, identity from the environment, a bare environment and no stdio; it exits when the runtime
goes away, because a launched plugin cannot reconnect."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bridge.contract.catalogue import NriEvent
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import PROFILES, SimulatedRuntime, load_scenario
from tests.waiting import until_exited

pytestmark = pytest.mark.processes  # starts processes: not in make check

STARTUP_S = 120.0


async def test_launched_bridge_registers_serves_and_exits_with_the_runtime(tmp_path: Path) -> None:
    # A busy machine can take seconds to start Python and import the bridge, and its first event
    # imports more: the runtime's windows (5 s to register, 2 s a request by default, as
    # containerd's) are widened so only a bridge that never registers or answers fails, not a
    # slow one (a CI run missed the 5 s under load).
    runtime = SimulatedRuntime(str(tmp_path / "unused.sock"), PROFILES["containerd-2.1.9"],
                               registration_timeout_s=STARTUP_S, request_timeout_s=30.0)
    await runtime.start()
    proc = runtime.launch([sys.executable, "-m", "bridge"], name="webhook-bridge", index="07")
    try:
        conn = await runtime.wait_plugin(timeout_s=STARTUP_S)
        assert conn.label.startswith("07-webhook-bridge"), conn.label
        assert conn.events & 0x8  # subscribed to CreateContainer (the cache needs it)
        step = next(s for s in load_scenario("containerd-2.1.9-events.jsonl").events
                    if s.event is NriEvent.CREATE_CONTAINER)
        assert isinstance(step.request, api.CreateContainerRequest)
        result = await runtime.create_container(step.request.pod, step.request.container)
        assert result.ok and not runtime.closed_plugins
        assert proc.poll() is None
    finally:
        await runtime.stop()  # closes our end of the socketpair, as a runtime shutdown does
        try:
            await until_exited(proc, what="the launched bridge exits when its socket closes",
                               timeout_s=5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
    assert proc.returncode == 0
