"""StateChange delivery and the v0.12 fallback after an Unimplemented answer
(docs/protocol.md#how-events-are-delivered)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.contract.catalogue import NriEvent, mask_of
from bridge.nri.handler_api import Handler
from bridge.proto.nri import api_pb2 as api
from bridge.simulator.connection import PluginConnection
from bridge.wire import envelope

from .harness import RawPlugin, connected, raw_connected

SUBSCRIBED = mask_of({NriEvent.RUN_POD_SANDBOX, NriEvent.CREATE_CONTAINER, NriEvent.START_CONTAINER,
                      NriEvent.REMOVE_CONTAINER})


async def empty(request: envelope.Request) -> bytes:
    return b""


async def adjust(request: envelope.Request) -> bytes:
    rsp = api.CreateContainerResponse()
    rsp.adjust.annotations["raw"] = "yes"
    return rsp.SerializeToString()


def spy_methods(conn: PluginConnection) -> list[str]:
    """Record the method of every Plugin-service call the runtime makes to `conn`."""
    methods: list[str] = []
    original = conn.call

    async def call(method: str, payload: bytes, timeout_s: float) -> bytes:
        methods.append(method)
        return await original(method, payload, timeout_s)

    conn.call = call  # type: ignore[method-assign]
    return methods


def state_change_events(plugin: RawPlugin) -> list[int]:
    events: list[int] = []
    for payload in plugin.called("StateChange"):
        change = api.StateChangeEvent()
        change.ParseFromString(payload)
        events.append(change.event)
    return events


@pytest.mark.timeout(10)
async def test_unimplemented_switches_plugin_to_state_change_for_good(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    plugin = RawPlugin(sock_path, {"StateChange": empty, "CreateContainer": adjust},
                       events=SUBSCRIBED)
    async with raw_connected(sock_path, plugin, "nri-v0.12") as (runtime, conn):
        methods = spy_methods(conn)
        first = await runtime.run_event("RunPodSandbox", pod)
        assert first.ok
        assert conn.use_state_change
        # Dedicated RPC answered `method RunPodSandbox` (12), then re-sent as StateChange.
        assert methods == ["RunPodSandbox", "StateChange"]
        created = await runtime.create_container(pod, container)
        assert created.ok and created.container is not None
        assert created.container.annotations["raw"] == "yes"  # no fallback for CreateContainer
        assert (await runtime.run_event("StartContainer", pod, container)).ok
        assert (await runtime.run_event("RemoveContainer", pod, container)).ok
        # Once switched, fallback events go straight to StateChange.
        assert methods[2:] == ["CreateContainer", "StateChange", "StateChange"]
        assert state_change_events(plugin) == [NriEvent.RUN_POD_SANDBOX, NriEvent.START_CONTAINER,
                                               NriEvent.REMOVE_CONTAINER]
        # Unsubscribed events are not sent at all.
        assert (await runtime.run_event("StopPodSandbox", pod)).ok
        assert len(methods) == 5
        assert runtime.closed_plugins == []


@pytest.mark.timeout(10)
async def test_old_runtime_uses_state_change_without_trying(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    plugin = RawPlugin(sock_path, {"StateChange": empty, "CreateContainer": adjust},
                       events=SUBSCRIBED)
    async with raw_connected(sock_path, plugin, "containerd-2.1.9") as (runtime, conn):
        methods = spy_methods(conn)
        assert (await runtime.run_event("RunPodSandbox", pod)).ok
        assert (await runtime.run_event("StartContainer", pod, container)).ok
        assert methods == ["StateChange", "StateChange"]
        assert not conn.use_state_change  # nothing was switched: that is just how it delivers


@pytest.mark.timeout(10)
async def test_unimplemented_create_container_fails_the_operation_only(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    plugin = RawPlugin(sock_path, {"StateChange": empty}, events=SUBSCRIBED)
    async with raw_connected(sock_path, plugin, "nri-v0.12") as (runtime, conn):
        result = await runtime.create_container(pod, container)
        assert result.error == "plugin 05-raw: method CreateContainer"
        assert conn.is_active and runtime.closed_plugins == []
        assert container.id not in runtime.state.containers


PLUGIN_METHODS = ("Configure", "Synchronize", "Shutdown", "RunPodSandbox", "UpdatePodSandbox",
                  "PostUpdatePodSandbox", "StopPodSandbox", "RemovePodSandbox", "CreateContainer",
                  "PostCreateContainer", "StartContainer", "PostStartContainer",
                  "UpdateContainer", "PostUpdateContainer", "StopContainer", "RemoveContainer",
                  "StateChange", "ValidateContainerAdjustment")


@pytest.mark.timeout(10)
async def test_plugin_core_answers_every_method_and_state_change(sock_path: Path) -> None:
    """Our plugin must never answer Unimplemented: a v0.12 runtime would switch it to
    StateChange for good (docs/protocol.md#how-events-are-delivered)."""
    async with connected(sock_path, Handler(), "nri-v0.12") as h:
        for method in PLUGIN_METHODS:
            if method in ("Configure", "Synchronize"):
                continue  # not re-run: a second Configure/Synchronize is not what runtimes do
            await h.conn.call(method, b"", 1.0)  # raises PluginFailed on any error status
        for event in [*range(0, 16), 99]:
            change = api.StateChangeEvent(event=event)
            await h.conn.call("StateChange", change.SerializeToString(), 1.0)
        assert h.conn.is_active and not h.conn.use_state_change
