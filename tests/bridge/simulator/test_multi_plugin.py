"""Several plugins: invocation order, merged view, conflicts; v0.10+ validation and pod events."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bridge.contract.catalogue import NriEvent, mask_of
from bridge.nri.handler_api import EventContext, Handler
from bridge.nri.session import PluginIdentity
from bridge.nri.stub import new_plugin
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import SimulatedRuntime, SimulatorError
from bridge.wire import envelope

from .harness import FAST_BACKOFF, RawPlugin, assert_no_leaked_tasks, raw_connected


class Setter(Handler):
    def __init__(self, env: str, shares: int | None = None) -> None:
        self.env = env
        self.shares = shares
        self.seen_env: list[str] = []

    async def create_container(self, ctx: EventContext, req: Any) -> api.CreateContainerResponse:
        self.seen_env = list(req.container.env)
        rsp = api.CreateContainerResponse()
        rsp.adjust.env.add(key=self.env, value="1")
        if self.shares is not None:
            rsp.adjust.linux.resources.cpu.shares.value = self.shares
        return rsp


async def run_two(path: Path, first: Handler, second: Handler,
                  pod: api.PodSandbox, container: api.Container) -> tuple[Any, SimulatedRuntime]:
    runtime = SimulatedRuntime(path, "containerd-2.1.9")
    await runtime.start()
    runners = [new_plugin(PluginIdentity("late", "20"), second, socket_path=str(path),
                            backoff=FAST_BACKOFF),
               new_plugin(PluginIdentity("early", "10"), first, socket_path=str(path),
                            backoff=FAST_BACKOFF)]
    tasks = []
    try:
        for runner in runners:  # connect the higher index first: order is by index, not time
            tasks.append(asyncio.create_task(runner.run()))
            await runtime.wait_plugin(5)
        assert [p.label for p in runtime.plugins] == ["10-early", "20-late"]
        return await runtime.create_container(pod, container), runtime
    finally:
        for runner in runners:
            await runner.stop(grace_s=0.1)
        await runtime.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await assert_no_leaked_tasks()


@pytest.mark.timeout(10)
async def test_plugins_run_in_index_order_and_see_earlier_changes(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    first, second = Setter("FIRST", shares=300), Setter("SECOND")
    result, runtime = await run_two(sock_path, first, second, pod, container)
    assert result.ok
    assert "FIRST=1" not in first.seen_env and "FIRST=1" in second.seen_env
    assert result.container is not None
    assert {"FIRST=1", "SECOND=1"} <= set(result.container.env)
    assert [label for label, _ in result.responses] == ["10-early", "20-late"]
    assert runtime.closed_plugins == []


@pytest.mark.timeout(10)
async def test_conflicting_plugins_fail_the_creation(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    result, runtime = await run_two(sock_path, Setter("A", shares=300), Setter("B", shares=600),
                                    pod, container)
    assert result.error == 'plugins "10-early" and "20-late" both tried to set CPUShares'
    assert runtime.closed_plugins == []  # a conflict closes nobody


@pytest.mark.timeout(10)
async def test_validator_sees_merged_adjustment_and_can_reject(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    seen: list[api.ValidateContainerAdjustmentRequest] = []

    async def create(request: envelope.Request) -> bytes:
        rsp = api.CreateContainerResponse()
        rsp.adjust.annotations["owner"] = "raw"
        return rsp.SerializeToString()

    async def validate(request: envelope.Request) -> bytes:
        req = api.ValidateContainerAdjustmentRequest()
        req.ParseFromString(request.payload)
        seen.append(req)
        reject = req.container.name == "app"
        return api.ValidateContainerAdjustmentResponse(
            reject=reject, reason="apps are not allowed").SerializeToString()

    plugin = RawPlugin(sock_path, {"CreateContainer": create,
                                   "ValidateContainerAdjustment": validate},
                       events=mask_of({NriEvent.CREATE_CONTAINER,
                                       NriEvent.VALIDATE_CONTAINER_ADJUSTMENT}))
    async with raw_connected(sock_path, plugin, "nri-v0.12") as (runtime, _):
        result = await runtime.create_container(pod, container)
        assert result.error == ('validator "05-raw" rejected container adjustment, '
                                "reason: apps are not allowed")
        [req] = seen
        assert req.adjust.annotations["owner"] == "raw"
        assert "owner" not in req.container.annotations  # the container before adjustment
        owners = req.owners.owners[container.id]
        assert owners.compound[api.Field.Value("Annotations")].owners["owner"] == "05-raw"
        assert [(p.name, p.index) for p in req.plugins] == [("raw", "05")]
        other = api.Container()
        other.CopyFrom(container)
        other.id, other.name = "e" * 64, "allowed"
        assert (await runtime.create_container(pod, other)).ok


@pytest.mark.timeout(10)
async def test_pod_update_events_only_on_v0_10_and_later(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, _ = pod_and_container
    calls: list[str] = []

    async def update_pod(request: envelope.Request) -> bytes:
        req = api.UpdatePodSandboxRequest()
        req.ParseFromString(request.payload)
        calls.append(f"UpdatePodSandbox cpu.shares={req.linux_resources.cpu.shares.value}")
        return b""

    plugin = RawPlugin(sock_path, {"UpdatePodSandbox": update_pod},
                       events=mask_of({NriEvent.UPDATE_POD_SANDBOX, NriEvent.CREATE_CONTAINER}))
    async with raw_connected(sock_path, plugin, "nri-v0.12") as (runtime, _):
        resources = api.LinuxResources()
        resources.cpu.shares.value = 2048
        result = await runtime.run_event("UpdatePodSandbox", pod, linux_resources=resources)
        assert result.ok and calls == ["UpdatePodSandbox cpu.shares=2048"]
    old = SimulatedRuntime(sock_path, "containerd-2.1.9")
    with pytest.raises(SimulatorError, match=r"containerd-2\.1\.9 has no UpdatePodSandbox"):
        await old.run_event("UpdatePodSandbox", pod)
    with pytest.raises(SimulatorError, match="unknown event"):
        await old.run_event("Explode", pod)
