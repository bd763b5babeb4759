"""The policy server dies or hangs mid-stream (docs/operations.md#the-promise): real bridge and
policy processes.

One bridge, two webhooks on the same nri-policy-server: `lenient`
(failure_policy Ignore, namespace default) and `strict` (Fail, namespace
strict), each with a circuit breaker that opens after 3 failures and cools
down for 4 s. While the policy is gone, Ignore answers the runtime in time with
no change and Fail fails the operation with a reason naming the webhook; once
the circuit is open, calls are skipped and answers come fast; after the policy
is back and the cool-down is over, the next call closes the circuit again.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bridge.simulator import SimulatedRuntime
from bridge.simulator.delivery import EventResult
from tests.integration.harness import pod_and_container

from .processes import BridgeProcess, Process, bridge_process, policy_process

pytestmark = [pytest.mark.processes, pytest.mark.timeout(60)]
MODULE = Path(__file__).with_name("env_policy.py")
REQUEST_TIMEOUT_S = 2.0
WEBHOOK_TIMEOUT_S = 0.5
THRESHOLD = 3
# Long enough that, however slow the machine, every call meant to meet an open circuit is made
# before the cool-down ends (in the hang test, half a second of timeouts comes first).
COOL_DOWN_S = 4.0


def webhooks(policy_sock: Path) -> dict[str, Any]:
    common = {"url": f"unix://{policy_sock}/v1/policies/hardening", "events": ["CreateContainer"],
              "timeout": f"{WEBHOOK_TIMEOUT_S}s",
              "circuit_breaker": {"failure_threshold": THRESHOLD, "cool_down": f"{COOL_DOWN_S}s"}}
    return {"webhooks": [
        {"name": "lenient", "failure_policy": "Ignore", "namespaces": ["default"], **common},
        {"name": "strict", "failure_policy": "Fail", "namespaces": ["strict"], **common}]}


@dataclass
class Stack:
    runtime: SimulatedRuntime
    bridge: BridgeProcess
    policy: Process
    policy_sock: Path
    workdir: Path
    serial: int = 0

    async def create(self, namespace: str) -> EventResult:
        """One CreateContainer in `namespace`."""
        self.serial += 1
        pod, container = pod_and_container(f"c{self.serial}", namespace)
        return await self.runtime.create_container(pod, container)


@contextlib.asynccontextmanager
async def stack(workdir: Path) -> AsyncIterator[Stack]:
    policy_sock, nri_sock = workdir / "policy.sock", workdir / "nri.sock"
    runtime = SimulatedRuntime(nri_sock, "containerd-2.1.9", request_timeout_s=REQUEST_TIMEOUT_S)
    await runtime.start()
    try:
        async with policy_process(workdir, policy_sock, MODULE) as policy, \
                bridge_process(workdir, nri_sock, config=webhooks(policy_sock)) as bridge:
            await runtime.wait_plugin(15)
            yield Stack(runtime, bridge, policy, policy_sock, workdir)
            assert runtime.closed_plugins == [] and runtime.lost_plugins == []
            assert bridge.running
    finally:
        await runtime.stop()


def _decided(result: EventResult) -> bool:
    """The policy's answer reached the container (not a fail-open pass-through)."""
    assert result.ok, result.error
    assert result.container is not None
    return "HARDENED=1" in result.container.env


async def _recovers(s: Stack) -> None:
    """After the cool-down the next call is the probe; it succeeds and closes the circuit."""
    await asyncio.sleep(COOL_DOWN_S + 0.1)  # the property is a period of time: let it pass
    for namespace in ("default", "strict"):
        result = await s.create(namespace)
        assert _decided(result), namespace
    metrics = await s.bridge.metrics()
    for hook in ("lenient", "strict"):
        assert metrics[f"nri_webhook_bridge_webhook_circuit_state{{webhook={hook}}}"] == 0


async def test_policy_killed_then_restarted(workdir: Path) -> None:
    async with stack(workdir) as s:
        assert _decided(await s.create("default"))
        assert _decided(await s.create("strict"))
        await s.policy.kill()  # SIGKILL: no goodbye, the socket file stays behind

        # No clocks: the outcome labels below say whether a call was refused (connect_error)
        # or skipped (circuit_open), and the runtime, which closes a plugin that misses its
        # deadline, kept the bridge.
        for i in range(THRESHOLD + 2):
            assert not _decided(await s.create("default"))  # Ignore: no change
            result = await s.create("strict")
            kind = "connect_error" if i < THRESHOLD else "circuit_open"
            assert result.error is not None
            assert f'webhook "strict" failed ({kind})' in result.error, result.error
        assert s.runtime.closed_plugins == []
        metrics = await s.bridge.metrics()
        for hook in ("lenient", "strict"):
            requests = "nri_webhook_bridge_webhook_requests_total{event=CreateContainer,outcome="
            assert metrics[f"nri_webhook_bridge_webhook_circuit_state{{webhook={hook}}}"] == 1
            assert metrics[f"{requests}connect_error,webhook={hook}}}"] == THRESHOLD
            assert metrics[f"{requests}circuit_open,webhook={hook}}}"] == 2
        assert metrics["nri_webhook_bridge_webhook_fail_open_total{event=CreateContainer,"
                       "webhook=lenient}"] == THRESHOLD + 2
        assert metrics["nri_webhook_bridge_webhook_rejections_total{event=CreateContainer,"
                       "webhook=strict}"] == THRESHOLD + 2

        async with policy_process(workdir, s.policy_sock, MODULE):  # a new server, same path
            await _recovers(s)


async def test_policy_hung_then_resumed(workdir: Path) -> None:
    async with stack(workdir) as s:
        assert _decided(await s.create("default"))
        s.policy.signal(signal.SIGSTOP)  # accepts connections, never answers
        try:
            for i in range(THRESHOLD + 1):
                tripped = i >= THRESHOLD
                assert not _decided(await s.create("default"))
                result = await s.create("strict")
                kind = "circuit_open" if tripped else "timeout"
                assert result.error is not None
                assert f'webhook "strict" failed ({kind})' in result.error, result.error
            # Answered in time, judged without a clock: each call ended by the webhook's
            # timeout (far inside the runtime's 2 s) or skipped by the open circuit; no
            # deadline missed, and the runtime, which closes late plugins, kept the bridge.
            metrics = await s.bridge.metrics()
            requests = "nri_webhook_bridge_webhook_requests_total{event=CreateContainer,outcome="
            assert metrics["nri_webhook_bridge_webhook_timeouts_total{event=CreateContainer,"
                           "webhook=lenient}"] == THRESHOLD
            assert metrics[f"{requests}circuit_open,webhook=lenient}}"] == 1
            assert metrics["nri_webhook_bridge_deadline_misses_total"] == 0
            assert s.runtime.closed_plugins == []
        finally:
            s.policy.signal(signal.SIGCONT)
        await _recovers(s)
