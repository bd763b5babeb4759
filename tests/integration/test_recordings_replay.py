"""Replay what containerd 2.2.7 / 2.3.4 / 2.4.0-beta.0 and CRI-O 1.36.3 sent, byte for byte, to
the bridge.

Each recording (bridge/simulator/scenarios, see its README) holds
every request the runtime sent to a plugin that added one env var and cpu
shares 512 and otherwise changed nothing, and that plugin's answers. The bridge,
with a real uvicorn policy making the same decision and subscribed to every
event, must answer every recorded request exactly as that plugin did; the
legacy-plugin recordings (everything but five RPCs as StateChange, fields the old
plugin did not know restored) must get the same answers too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.contract.catalogue import EVENT_NAMES
from bridge.simulator.recording import message_types
from bridge.simulator.runtime import SimulatedRuntime
from bridge.simulator.scenario import SCENARIO_DIR
from tests.integration.harness import running_bridge, short_tmpdir, webhook
from tests.integration.policy_app import Knobs, serve_policy
from tests.recordings import load_wire_log

pytestmark = pytest.mark.timeout(60)

NOOP = {"adjust": {"env": [{"key": "NRI_NOOP", "value": "injected-by-nri-noop"}],
                   "linux": {"resources": {"cpu": {"shares": 512}}}}}
RECORDINGS = [f"{runtime}{suffix}" for runtime in ("containerd-2.2.7", "containerd-2.3.4",
                                                    "containerd-2.4.0-beta.0", "cri-o-1.36.3")
              for suffix in ("-wire", "-wire-legacy-plugin")]
# containerd from 2.3 (NRI v0.12) sends PostUpdatePodSandbox after UpdatePodSandbox; CRI-O never.
POST_RESIZE = ("containerd-2.3.4-wire", "containerd-2.4.0-beta.0-wire")


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_tmpdir() as path:
        yield path


@pytest.mark.parametrize("name", RECORDINGS)
async def test_bridge_answers_every_recorded_request_like_the_recording_plugin(
        workdir: Path, name: str) -> None:
    lines = load_wire_log(SCENARIO_DIR / f"{name}.jsonl")
    profile = name.split("-wire")[0]
    runtime = SimulatedRuntime(workdir / "nri.sock", profile)
    knobs = Knobs(replies={"CreateContainer": NOOP})
    hook = webhook(workdir / "policy.sock", events=list(EVENT_NAMES))
    await runtime.start()
    try:
        async with serve_policy(str(workdir / "policy.sock"), knobs), \
                running_bridge(runtime, [hook], workdir) as bridge:
            conn = runtime.plugins[0]
            # Subscribed to every event the runtime has, validation included: the same
            # mask the (current) recording plugin answered.
            assert conn.events == 0x3FFF
            assert bridge.runner.ready
            # Configure ran in the handshake (checked in tests/bridge/simulator).
            for line in lines[1:]:
                payload = await conn.call(line.rpc, line.request.SerializeToString(), 2.0)
                response = message_types(line.rpc)[1]()
                response.ParseFromString(payload)
                assert response == line.response, (line.rpc, line.event)
            assert runtime.closed_plugins == [] and runtime.lost_plugins == []
    finally:
        await runtime.stop()
    # The policy saw every event the runtime sent, however it was carried, and Synchronize
    # twice: the handshake's and the recorded one (both empty: the node's state too).
    sent = [line.event.rpc_name for line in lines if line.event is not None]
    assert knobs.events() == ["Synchronize", "Synchronize", *sent]
    by_event = {body["event"]: body for body in knobs.seen}
    if "UpdatePodSandbox" in by_event:  # containerd 2.3.4 / 2.4, CRI-O: a pod resize
        resize = by_event["UpdatePodSandbox"]
        assert resize["linux_resources"]["memory"]["limit"] == 268435456
        assert resize["overhead_linux_resources"]["memory"]["limit"] == 16777216
        assert resize["pod"]["name"].startswith("demo-upd-")
    assert ("PostUpdatePodSandbox" in by_event) == (name in POST_RESIZE)
    if "ValidateContainerAdjustment" in by_event:
        validate = by_event["ValidateContainerAdjustment"]
        assert validate["plugins"] == [{"name": "noopmodern", "index": "10"}]
        [owners] = validate["owners"]["owners"].values()
        assert owners["simple"] == {"16": "10-noopmodern"}  # CPUShares
