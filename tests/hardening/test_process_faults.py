"""Faults around the bridge process (docs/operations.md#the-promise,
docs/protocol.md#external-plugins): real `python -m bridge` processes.

- the runtime restarts five times: the bridge reconnects, re-registers and
  re-synchronizes every time, never exits, and holds no more fds than before;
- the NRI socket is unlinked, its directory removed, a stale socket left in
  its place, and finally a runtime listens there again: the bridge keeps
  serving on its old connection, then retries with back-off and connects to
  the new socket;
- SIGTERM while an event is in flight: the event is answered, or the
  connection is closed cleanly (no half frame, no protocol error); exit 0;
- `record --output /dev/full`: serving goes on, one clear log line.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
from pathlib import Path

import pytest

from bridge.simulator import SimulatedRuntime
from bridge.simulator.synthetic import synthetic_state
from tests.integration.harness import pod_and_container
from tests.waiting import until

from .processes import BridgeProcess, bridge_process, open_fds, policy_process

pytestmark = [pytest.mark.processes, pytest.mark.timeout(60)]
MODULE = Path(__file__).with_name("env_policy.py")
RESTARTS = 5


async def test_runtime_restarted_repeatedly(workdir: Path) -> None:
    sock = workdir / "nri.sock"
    runtime = SimulatedRuntime(sock, "containerd-2.1.9")
    runtime.state.seed(*synthetic_state(3, 12))
    await runtime.start()
    try:
        async with bridge_process(workdir, sock) as bridge:
            first = await runtime.wait_plugin(15)
            fds_before = open_fds(bridge.pid)
            for i in range(RESTARTS):
                await runtime.stop()
                assert not first.is_active
                await runtime.start()
                conn = await runtime.wait_plugin(10)
                assert conn.label == "40-hardening" and conn.sync_chunks == 1
                pod, container = pod_and_container(f"after-restart-{i}")
                assert (await runtime.create_container(pod, container)).ok
            registered = await bridge.wait_log("registered", count=RESTARTS + 1)
            synced = [line["msg"] for line in bridge.json_lines()
                      if line["msg"].startswith("synchronized")]
            metrics = await bridge.metrics()
            fds_after = open_fds(bridge.pid)
            assert bridge.running
            code, _ = await bridge.terminate()
    finally:
        await runtime.stop()
    assert code == 0
    assert len(registered) == RESTARTS + 1
    # Each re-sync carries what the runtime knows by then: the seeded state plus
    # the containers created between restarts.
    assert synced == ["synchronized 3 pods, 12 containers; 0 updates"] + [
        f"synchronized 3 pods, {12 + i} containers; 0 updates" for i in range(RESTARTS)]
    assert runtime.closed_plugins == []  # never dropped for misbehaving
    assert metrics["nri_webhook_bridge_connected"] == 1
    assert metrics["nri_webhook_bridge_reconnects_total"] >= RESTARTS
    # One NRI connection whatever happened before: a socket leaked per restart would
    # show +5. Keep-alive connections (the control API request just made, the pool to
    # the policy) come and go, so the socket count may move by one either way.
    assert {k: v for k, v in fds_after.items() if k != "socket"} == {
        k: v for k, v in fds_before.items() if k != "socket"}
    assert abs(fds_after.get("socket", 0) - fds_before.get("socket", 0)) <= 1, (fds_before,
                                                                                 fds_after)


async def test_socket_removed_and_recreated(workdir: Path) -> None:
    sock = workdir / "run" / "nri" / "nri.sock"
    runtime = SimulatedRuntime(sock)
    await runtime.start()
    pod, container = pod_and_container("survivor")
    try:
        async with bridge_process(workdir, sock) as bridge:
            first = await runtime.wait_plugin(15)
            sock.unlink()  # an established connection does not need the path
            assert (await runtime.create_container(pod, container)).ok and first.is_active

            await runtime.stop()
            shutil.rmtree(sock.parent)  # e.g. /var/run/nri wiped
            await bridge.wait_log("connection lost", count=3)
            sock.parent.mkdir(parents=True)
            stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            stale.bind(str(sock))  # bound, never listening: connect() is refused
            lost_before = len(await bridge.wait_log("connection lost"))
            await bridge.wait_log("connection lost", count=lost_before + 1, timeout_s=10)
            stale.close()

            fresh = SimulatedRuntime(sock)  # a new runtime replaces the stale socket
            await fresh.start()
            try:
                # The new socket ends the bridge's back-off wait at once (socket watch); the
                # 15 s bound is not a measurement, it only catches a bridge that never comes.
                conn = await fresh.wait_plugin(15)
                assert conn.label == "40-hardening"
                assert (await fresh.create_container(pod, container)).ok
            finally:
                await fresh.stop()
            reasons = [line["reason"] for line in bridge.json_lines()
                       if line.get("msg") == "connection lost"]
            assert bridge.running
    finally:
        await runtime.stop()
    assert any("No such file or directory" in r for r in reasons)
    assert any("Connection refused" in r for r in reasons)


# (webhook timeout, runtime request timeout in seconds)
IN_FLIGHT = {
    # webhook timeout < shutdown grace (2 s): the event is answered, then the bridge exits
    "answered": ("1s", 2.0),
    # webhook timeout > shutdown grace: the bridge closes with the event in flight
    "closed": ("5s", 10.0),
}


@pytest.mark.parametrize("case", sorted(IN_FLIGHT))
async def test_sigterm_with_an_event_in_flight(workdir: Path, case: str) -> None:
    webhook_timeout, request_timeout_s = IN_FLIGHT[case]
    policy_sock, nri_sock = workdir / "policy.sock", workdir / "nri.sock"
    config = {"webhooks": [{"name": "slow", "url": f"unix://{policy_sock}/v1/policies/hardening",
                            "events": ["CreateContainer"], "timeout": webhook_timeout}]}
    runtime = SimulatedRuntime(nri_sock, "containerd-2.1.9", request_timeout_s=request_timeout_s)
    await runtime.start()
    try:
        async with policy_process(workdir, policy_sock, MODULE) as policy, \
                bridge_process(workdir, nri_sock, config=config) as bridge:
            conn = await runtime.wait_plugin(15)
            assert conn.trunk is not None
            policy.signal(signal.SIGSTOP)  # the policy takes as long as the bridge lets it
            try:
                event = asyncio.create_task(runtime.create_container(*pod_and_container()))
                await wait_until_in_flight(bridge, 1)  # the bridge holds the event
                assert not event.done()
                code, _ = await bridge.terminate()
                result = await asyncio.wait_for(event, 5)
            finally:
                policy.signal(signal.SIGCONT)
            await asyncio.wait_for(conn.trunk.wait_closed(), 10)  # a hang bound
            close_reason = conn.trunk.close_reason
            leftover = conn.trunk.pending_bytes
            grace_ran_out = [line for line in bridge.json_lines()
                             if line.get("msg") == "closing with 1 events still in flight"]
    finally:
        await runtime.stop()
    assert code == 0
    assert leftover == 0  # the runtime holds no half frame
    assert result.ok  # answered, or fail-open after the plugin went away
    if case == "answered":
        assert result.container is not None and "HARDENED=1" not in result.container.env
        assert runtime.closed_plugins == []
        assert close_reason == "connection closed by peer"
        # Exited once the event was answered, not when the grace period ran out.
        assert not grace_ran_out
    else:
        # The runtime saw the connection close under a pending call: a fatal
        # error that closes the plugin, never a protocol error.
        [(name, reason)] = runtime.closed_plugins
        assert name == "40-hardening"
        assert reason == "CreateContainer: connection closed (connection closed by peer)"
        # The 2 s shutdown grace ran out, then a clean close (terminate() bounds the exit).
        assert grace_ran_out
    assert "protocol" not in close_reason


async def wait_until_in_flight(bridge: BridgeProcess, events: int) -> None:
    """Until the bridge's own gauge shows `events` runtime requests being handled."""
    async def in_flight() -> bool:
        return (await bridge.metrics())["nri_webhook_bridge_in_flight_events"] == events
    await until(in_flight, what=f"{events} events in flight", timeout_s=10)


async def test_recording_to_a_full_disk_keeps_serving(workdir: Path) -> None:
    sock = workdir / "nri.sock"
    runtime = SimulatedRuntime(sock, "containerd-2.1.9")
    await runtime.start()
    try:
        async with bridge_process(workdir, sock, subcommand="record",
                                  extra=["--output", "/dev/full"]) as bridge:
            await runtime.wait_plugin(15)
            results = []
            for i in range(5):
                pod, container = pod_and_container(f"full-{i}")
                results.append(await runtime.create_container(pod, container))
                results.append(await runtime.run_event("RemoveContainer", pod, container))
            errors = await bridge.wait_log("recording to /dev/full failed, suspending for 30s: "
                                           "No space left on device")
            code, _ = await bridge.terminate()
            closed = await bridge.wait_log("recording closed")
    finally:
        await runtime.stop()
    assert code == 0
    assert all(r.ok for r in results) and runtime.closed_plugins == []
    [error] = errors  # once, not once per event
    assert error["level"] == "error"
    # Synchronize and 10 events: none written, all dropped (counted, not lost silently).
    assert closed[0]["written"] == 0 and closed[0]["dropped"] == 11
