"""The simulator profiles of containerd 2.2.7 / 2.3.4 / 2.4.0-beta.0 and CRI-O 1.36.3 against their
recordings.

The wire logs in bridge/simulator/scenarios (recorded from real runtimes, see its README) are
the specification of those runtimes: a plugin subscribed to every event (and
validating) went through one pod lifecycle and one pod resize, and a v0.6-era
plugin through the same. A fixed CRI script run on the simulator must put the
same RPCs on the wire, in the same order, with the same Configure and the
same validation request (merged adjustment, owners, plugins).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.contract.catalogue import NriEvent
from bridge.nri.handler_api import EventContext, Handler
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.profiles import PROFILES
from bridge.simulator.connection import PluginConnection
from bridge.simulator.cri_calls import CriUnimplemented, run_cri
from bridge.simulator.default_validator import DefaultValidator
from bridge.simulator.handshake import configure_request
from bridge.simulator.recording import WireLine
from bridge.simulator.runtime import SimulatedRuntime
from bridge.simulator.scenario import SCENARIO_DIR
from bridge.simulator.simulator_error import SimulatorError
from bridge.simulator.synthetic import template
from bridge.wire import envelope
from tests.recordings import load_wire_log, rpc_sequence

from .harness import RawPlugin, connected, raw_connected

MODERN = ("containerd-2.2.7", "containerd-2.3.4", "containerd-2.4.0-beta.0", "cri-o-1.36.3")
DEDICATED = ("containerd-2.3.4", "containerd-2.4.0-beta.0")  # NRI v0.12: an RPC per event
HANDSHAKE = frozenset({"Configure", "Synchronize"})


def recording(profile: str, legacy: bool = False) -> list[WireLine]:
    suffix = "-wire-legacy-plugin.jsonl" if legacy else "-wire.jsonl"
    return load_wire_log(SCENARIO_DIR / f"{profile}{suffix}")


class Noop(Handler):
    """What the recording plugin did: every event, validation included; one env var
    and cpu shares 512 on CreateContainer."""

    def __init__(self) -> None:
        self.validations: list[api.ValidateContainerAdjustmentRequest] = []

    def wanted_events(self) -> frozenset[NriEvent]:
        return frozenset(NriEvent)

    async def create_container(self, ctx: EventContext, req: Any) -> api.CreateContainerResponse:
        rsp = api.CreateContainerResponse()
        rsp.adjust.env.add(key="NRI_NOOP", value="injected-by-nri-noop")
        rsp.adjust.linux.resources.cpu.shares.value = 512
        return rsp

    async def validate_container_adjustment(
            self, ctx: EventContext, req: api.ValidateContainerAdjustmentRequest,
    ) -> api.ValidateContainerAdjustmentResponse:
        self.validations.append(req)
        return api.ValidateContainerAdjustmentResponse()


def spy(conn: PluginConnection) -> list[tuple[str, str]]:
    """Every Plugin-service call the runtime makes to `conn`, as (rpc, StateChange event)."""
    seen: list[tuple[str, str]] = []
    original = conn.call

    async def call(method: str, payload: bytes, timeout_s: float) -> bytes:
        seen.append((method, _state_change_event(method, payload)))
        return await original(method, payload, timeout_s)

    conn.call = call  # type: ignore[method-assign]
    return seen


def _state_change_event(method: str, payload: bytes) -> str:
    if method != "StateChange":
        return ""
    change = api.StateChangeEvent()
    change.ParseFromString(payload)
    return NriEvent(change.event).name


async def lifecycle(runtime: SimulatedRuntime) -> list[str]:
    """The recorded CRI script: one pod with one container through its whole life, then
    a second pod that is resized. Returns the CRI calls the runtime did not implement."""
    pod, container = template()
    second = api.PodSandbox()
    second.CopyFrom(pod)
    second.id, second.name, second.uid = "f" * 64, "demo-upd", "demo-upd-uid"
    resources = api.LinuxResources()
    resources.memory.limit.value = 96 << 20
    resources.cpu.shares.value = 768
    pod_resources = api.LinuxResources()
    pod_resources.memory.limit.value = 256 << 20
    overhead = api.LinuxResources()
    overhead.memory.limit.value = 16 << 20
    unimplemented = []
    created = await run_cri(runtime, "RunPodSandbox", pod)
    assert created.ok, created.error
    steps: list[tuple[str, api.PodSandbox, dict[str, Any]]] = [
        ("CreateContainer", pod, {}), ("StartContainer", pod, {}),
        ("UpdateContainerResources", pod, {"linux_resources": resources}),
        ("StopContainer", pod, {}), ("RemoveContainer", pod, {}),
        ("StopPodSandbox", pod, {}), ("RemovePodSandbox", pod, {}),
        ("RunPodSandbox", second, {}),
        ("UpdatePodSandboxResources", second, {"linux_resources": pod_resources,
                                               "overhead_linux_resources": overhead}),
        ("StopPodSandbox", second, {}), ("RemovePodSandbox", second, {}),
    ]
    for call, subject, kwargs in steps:
        target = container if "Container" in call else None
        try:
            result = await run_cri(runtime, call, subject, target, **kwargs)
        except CriUnimplemented:
            unimplemented.append(call)
            continue
        assert result.ok, result.error
        if result.container is not None:
            container = result.container
    return unimplemented


@pytest.mark.parametrize("profile", MODERN)
@pytest.mark.parametrize("legacy", [False, True], ids=["current-plugin", "legacy-plugin"])
def test_configure_is_the_recorded_one(profile: str, legacy: bool) -> None:
    recorded = recording(profile, legacy)[0]
    assert recorded.rpc == "Configure"
    # Both runs were made with the runtimes' defaults: 5 s registration, 2 s requests.
    sent = configure_request(PROFILES[profile], "", 5.0, 2.0)
    assert sent == recorded.request
    assert sent.SerializeToString() == recorded.request.SerializeToString()  # byte for byte


@pytest.mark.timeout(20)
@pytest.mark.parametrize("profile", MODERN)
async def test_traffic_matches_the_recording(sock_path: Path, profile: str) -> None:
    recorded = recording(profile)
    handler = Noop()
    async with connected(sock_path, handler, profile, name="noopmodern", index="10") as h:
        assert h.conn.events == recorded[0].response.events  # type: ignore[attr-defined]
        seen = spy(h.conn)
        unimplemented = await lifecycle(h.runtime)
        assert seen == rpc_sequence(recorded, skip=HANDSHAKE)
        assert unimplemented == (["UpdatePodSandboxResources"]
                                 if profile == "containerd-2.2.7" else [])
        assert h.runtime.closed_plugins == [] and h.runtime.lost_plugins == []
    # The validation request: merged adjustment, owners keyed by container id, plugins.
    [validation] = handler.validations
    [expected] = [line.request for line in recorded if line.rpc == "ValidateContainerAdjustment"]
    assert isinstance(expected, api.ValidateContainerAdjustmentRequest)
    assert validation.adjust == expected.adjust
    assert list(validation.plugins) == list(expected.plugins)
    [(_, owners)] = validation.owners.owners.items()
    [(_, expected_owners)] = expected.owners.owners.items()
    assert owners == expected_owners


async def _empty(request: envelope.Request) -> bytes:
    return b""


async def _noop_adjust(request: envelope.Request) -> bytes:
    rsp = api.CreateContainerResponse()
    rsp.adjust.env.add(key="NRI_NOOP", value="injected-by-nri-noop")
    rsp.adjust.linux.resources.cpu.shares.value = 512
    return rsp.SerializeToString()


@pytest.mark.timeout(20)
@pytest.mark.parametrize("profile", MODERN)
async def test_legacy_plugin_traffic_matches_the_recording(sock_path: Path, profile: str) -> None:
    """A plugin that only has the v0.6 RPCs: containerd 2.3.4 and 2.4.0-beta.0 try each
    dedicated RPC, get Unimplemented and fall back to StateChange; the plugin sees what was
    recorded."""
    recorded = recording(profile, legacy=True)
    plugin = RawPlugin(sock_path, {"StateChange": _empty, "CreateContainer": _noop_adjust,
                                   "UpdateContainer": _empty, "StopContainer": _empty},
                       events=recorded[0].response.events)  # type: ignore[attr-defined]
    async with raw_connected(sock_path, plugin, profile) as (runtime, conn):
        await lifecycle(runtime)
        handled = [(m, _state_change_event(m, p)) for m, p in plugin.calls]
        assert handled == rpc_sequence(recorded)
        assert conn.use_state_change == (profile in DEDICATED)
        assert runtime.closed_plugins == []


class Rejecting(Noop):
    async def validate_container_adjustment(
            self, ctx: EventContext, req: api.ValidateContainerAdjustmentRequest,
    ) -> api.ValidateContainerAdjustmentResponse:
        return api.ValidateContainerAdjustmentResponse(reject=True, reason="cpu shares too high")


@pytest.mark.timeout(10)
@pytest.mark.parametrize("profile", MODERN)
async def test_validator_reject_fails_create_with_the_runtime_message(
        sock_path: Path, profile: str) -> None:
    pod, container = template()
    async with connected(sock_path, Rejecting(), profile, name="noopmodern", index="10") as h:
        result = await run_cri(h.runtime, "CreateContainer", pod, container)
        # The reject travels in the reply (not as an RPC error) and fails CRI CreateContainer;
        # PostCreateContainer does not follow and nothing of the adjustment is applied.
        assert result.error == ('validator "10-noopmodern" rejected container adjustment, '
                                "reason: cpu shares too high")
        assert [r.event for r in result.events] == ["CreateContainer"]
        assert container.id not in h.runtime.state.containers
        assert h.conn.is_active


@pytest.mark.timeout(20)
async def test_default_validator_fails_closed_without_the_required_plugin(
        sock_path: Path) -> None:
    """The fail-closed recipe (deploy/runtime/*-fail-closed.*): the runtime's default
    validator requires the bridge; without it CreateContainer fails, unless the pod
    carries the tolerate annotation; with it, validation lists 00-default-validator."""
    validator = DefaultValidator(("webhook-bridge",),
                                 "tolerate-missing-nri-plugins.noderesource.dev")
    pod, container = template()
    runtime = SimulatedRuntime(sock_path, "containerd-2.3.4", default_validator=validator)
    await runtime.start()
    try:
        refused = await run_cri(runtime, "CreateContainer", pod, container)
        assert refused.error == ('validator "00-default-validator" rejected container '
                                 "adjustment, reason: required plugins 'webhook-bridge' "
                                 "not present")
        tolerant = api.PodSandbox()
        tolerant.CopyFrom(pod)
        tolerant.annotations["tolerate-missing-nri-plugins.noderesource.dev/pod"] = "true"
        assert (await run_cri(runtime, "CreateContainer", tolerant, container)).ok
    finally:
        await runtime.stop()
    handler = Noop()
    async with connected(sock_path, handler, "containerd-2.3.4", name="webhook-bridge",
                         index="50", default_validator=validator) as h:
        second = api.Container()
        second.CopyFrom(container)
        second.id = "b" * 64
        assert (await run_cri(h.runtime, "CreateContainer", pod, second)).ok
    [validation] = handler.validations
    assert [(p.index, p.name) for p in validation.plugins] == [
        ("00", "default-validator"), ("50", "webhook-bridge")]


def test_default_validator_needs_nri_v0_10(sock_path: Path) -> None:
    with pytest.raises(SimulatorError, match="no default validator"):
        SimulatedRuntime(sock_path, "containerd-2.1.9", default_validator=DefaultValidator())
