"""record -> replay round trip with real processes: a policy server, the bridge in
`record` mode, the runtime simulator; then `replay` against the same policy (no
differences) and against a deliberately changed policy (flagged, exit 1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bridge.simulator import PROFILES, SimulatedRuntime, load_scenario, run_scenario
from tests.waiting import healthz, until

pytestmark = pytest.mark.processes  # starts processes: not in make check

BIN = Path(sys.executable).parent
POLICY = """
from policy_server import Adjustment, Decision, Event, EventName, Policy

policy = Policy("tier", description="env TIER from the koordinator QoS label")


@policy.on(EventName.CREATE_CONTAINER)
def tier(event: Event) -> Decision | None:
    qos = event.pod.labels.get("koordinator.sh/qosClass") if event.pod else None
    return Decision(adjust=Adjustment(env={{"TIER": {value}}})) if qos else None
"""


def _spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture
async def policy(tmp_path: Path) -> AsyncIterator[tuple[Path, Path]]:
    """A running policy server for the `tier` policy; yields (socket, policy file)."""
    module = tmp_path / "tier_policy.py"
    module.write_text(POLICY.format(value='"qos-" + qos'))
    sock = tmp_path / "policy.sock"
    proc = _spawn([str(BIN / "nri-policy-server"), "--uds", str(sock), "--no-koordinator",
                   "--policy-module", str(module)], tmp_path / "policy.log")
    try:
        await until(healthz(sock), what=f"{sock} healthy", timeout_s=10, proc=proc,
                    in_thread=True)
        yield sock, module
    finally:
        _stop(proc)


def _replay(recording: Path, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "nri-webhook-bridge"), "replay", str(recording),
                           "--policy-url", url], capture_output=True, text=True, timeout=60,
                          check=False)


async def test_record_then_replay_round_trip(tmp_path: Path,
                                             policy: tuple[Path, Path]) -> None:
    sock, _ = policy
    url = f"unix://{sock}/v1/policies/tier"
    recording = tmp_path / "events.jsonl"
    runtime = SimulatedRuntime(str(tmp_path / "nri.sock"), PROFILES["containerd-2.1.9"])
    scenario = load_scenario("koordinator-qos.json")
    scenario.seed(runtime)
    await runtime.start()
    bridge = _spawn([str(BIN / "nri-webhook-bridge"), "record", "--output", str(recording),
                     "--redact-env", "--nri-socket", str(tmp_path / "nri.sock"),
                     "--policy-url", url, "--control-socket", str(tmp_path / "control.sock")],
                    tmp_path / "bridge.log")
    try:
        await runtime.wait_plugin(timeout_s=20)
        results = await run_scenario(runtime, scenario)
        assert all(r.ok for r in results)
        created = [r.container for r in results if r.event == "CreateContainer"]
        assert None not in created
        assert {e for c in created if c is not None for e in c.env if e.startswith("TIER=")} == {
            "TIER=qos-LSR", "TIER=qos-LS", "TIER=qos-BE"}
    finally:
        _stop(bridge)
        await runtime.stop()
    records = [json.loads(line) for line in recording.read_text().splitlines()]
    events = [r["event"] for r in records]
    assert events.count("CreateContainer") == 3 and "Synchronize" in events
    creates = [r for r in records if r["event"] == "CreateContainer"]
    assert all(r["reply"]["adjust"]["env"][0]["key"] == "TIER" for r in creates)
    assert all(v.endswith("=<redacted>") for r in creates for v in r["request"]["container"]["env"])

    same = _replay(recording, url)
    assert same.returncode == 0, same.stdout + same.stderr
    assert f"{len(records)} passed, 0 failed" in same.stdout

    # A deliberately changed policy: same name, different value. Replay must flag it.
    changed = tmp_path / "changed"
    changed.mkdir()
    module = changed / "tier_policy.py"
    module.write_text(POLICY.format(value='"tier-" + qos.lower()'))
    sock2 = changed / "policy.sock"
    proc = _spawn([str(BIN / "nri-policy-server"), "--uds", str(sock2), "--no-koordinator",
                   "--policy-module", str(module)], changed / "policy.log")
    try:
        await until(healthz(sock2), what=f"{sock2} healthy", timeout_s=10, proc=proc,
                    in_thread=True)
        different = _replay(recording, f"unix://{sock2}/v1/policies/tier")
    finally:
        _stop(proc)
    assert different.returncode == 1, different.stdout
    assert different.stdout.count("DIFF  CreateContainer") == 3
    assert '"value": "tier-lsr"' in different.stdout and '"value": "qos-LSR"' in different.stdout
    assert f"{len(records) - 3} passed, 3 failed" in different.stdout


def test_replay_usage_errors_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    result = _replay(bad, "unix:///nowhere.sock/x")
    assert result.returncode == 2 and "not JSON" in result.stdout
    result = _replay(tmp_path / "missing.jsonl", "unix:///nowhere.sock/x")
    assert result.returncode == 2 and "cannot read" in result.stdout
    assert os.environ.get("NRI_PLUGIN_SOCKET") is None
