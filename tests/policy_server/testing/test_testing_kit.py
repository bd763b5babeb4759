"""The policy test kit (policy_server.testing): contract checks, replay, parity with the CLI."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bridge.contract.request_body import DEFAULT_BUDGET_MS, default_envelope
from bridge.contract.request_structs import WebhookRequest
from policy_server import (
    Adjustment,
    ContainerUpdate,
    Decision,
    Event,
    EventName,
    Policy,
    ResourcePatch,
)
from policy_server.assemble import assemble
from policy_server.engine.reply import check_reply, encode_reply
from policy_server.exceptions import InvalidReplyError
from policy_server.service import ServerOptions
from policy_server.testing import (
    InvalidReply,
    InvalidRequest,
    PolicyRunner,
    load_request,
    make_request,
)
from tests.policy_server.factory import evaluate_json
from tests.policy_server.servers import serve_on_uds

ROOT = Path(__file__).parents[3]
EXAMPLE = ROOT / "examples" / "python-policy"
RECORDING = EXAMPLE / "recording.jsonl"


def renamed_env_policy() -> Policy[None]:
    """downward-env's name with a different answer: every replayed CreateContainer differs."""
    policy = Policy("downward-env")

    @policy.on(EventName.CREATE_CONTAINER)
    def other(event: Event) -> Decision:
        return Decision(adjust=Adjustment(env={"POD_NAME": "someone-else"}))

    return policy


def test_replay_reports_differences_like_the_cli() -> None:
    result = PolicyRunner(renamed_env_policy()).replay(RECORDING)
    assert not result.ok and len(result.outcomes) == 7
    assert [o.case.request["event"] for o in result.failed] == ["CreateContainer"]
    report = result.report()
    assert f"DIFF  CreateContainer ({RECORDING}:3)" in report
    assert '+        "value": "someone-else"' in report and report.endswith("6 passed, 1 failed")
    with pytest.raises(AssertionError, match="6 passed, 1 failed"):
        result.assert_ok()


def test_replay_against_expected_replies(tmp_path: Path) -> None:
    records = [json.loads(line) for line in RECORDING.read_text().splitlines()]
    create = next(r for r in records if r["event"] == "CreateContainer")
    expected = tmp_path / "expected.jsonl"
    expected.write_text(json.dumps({"request": create["request"], "reply": {
        "adjust": {"env": [{"key": "POD_NAME", "value": "someone-else"}]}}}) + "\n")
    assert PolicyRunner(renamed_env_policy()).replay(RECORDING, expected=expected).ok
    assert [r["event"] for r in PolicyRunner(renamed_env_policy()).events(RECORDING)] == [
        r["event"] for r in records]


def _past_the_sdk() -> Adjustment:
    """An adjustment outside the contract: the SDK refuses ``env={"A": 1}`` when built, so the
    value is changed after (a stand-in for a check the SDK would miss, which the kit catches)."""
    adjust = Adjustment(env={"A": "1"})
    object.__setattr__(adjust, "env", {"A": 1})
    return adjust


def test_requests_and_replies_are_checked_against_the_contract() -> None:
    bad = Policy("bad-env")

    @bad.on(EventName.CREATE_CONTAINER)
    def untyped(event: Event) -> Decision:
        return Decision(adjust=_past_the_sdk())

    runner = PolicyRunner(bad)
    with pytest.raises(InvalidReply, match="outside the contract"):
        runner.send(make_request("CreateContainer"))
    broken = make_request("CreateContainer")
    broken["container"]["linux"] = {"resources": {"cpu": {"shares": "lots"}}}
    with pytest.raises(InvalidRequest, match="not a webhook request"):
        runner.send(broken)
    # In a replay the same faults are failed outcomes, not exceptions.
    failed = runner.replay(RECORDING).failed
    assert len(failed) == 1 and "outside the contract" in str(failed[0].error)


def test_the_kit_checks_replies_as_the_bridge_does() -> None:
    """The kit checks the reply the server would send (the one encoder's bytes) against the
    contract's ``WebhookReply``, naming the fields outside it; a reply inside passes."""
    bad = Policy("bad-env")

    @bad.on(EventName.CREATE_CONTAINER)
    def untyped(event: Event) -> Decision:
        return Decision(adjust=_past_the_sdk())

    evaluation = evaluate_json(PolicyRunner(bad).engine, "bad-env",
                                                        make_request("CreateContainer"))
    with pytest.raises(InvalidReplyError) as check:
        check_reply(encode_reply(evaluation.decision))
    with pytest.raises(InvalidReply) as kit_side:
        PolicyRunner(bad).send(make_request("CreateContainer"))
    assert str(check.value) in str(kit_side.value)
    assert check.value.errors
    loc = check.value.errors[0]["loc"]
    assert isinstance(loc, tuple) and loc[:2] == ("adjust", "env")

    marker = Policy("marker")

    @marker.on(EventName.CREATE_CONTAINER)
    def warn(event: Event) -> Decision:
        return Decision(warnings=("checked by the kit",))

    sent = PolicyRunner(marker).send(make_request("CreateContainer"))
    assert sent.json == {"warnings": ["checked by the kit"]}


def test_make_request_takes_its_envelope_from_the_contract() -> None:
    """The envelope defaults live once (bridge.contract.request_body): same keys, values and
    order as the one encoder writes them, and a body the contract accepts."""
    body = make_request("StartContainer")
    envelope = default_envelope("StartContainer", "test-StartContainer")
    assert list(body)[:len(envelope)] == list(envelope)
    assert {key: body[key] for key in envelope} == envelope
    assert envelope["budget_ms"] == DEFAULT_BUDGET_MS and envelope["dry_run"] is False
    msgspec.json.decode(json.dumps(body), type=WebhookRequest)  # the declaration takes it


def test_several_policies_need_a_name() -> None:
    runner = PolicyRunner.from_module(ROOT / "examples" / "label_env_policy.py")
    other = PolicyRunner(renamed_env_policy(), *runner.registry)
    with pytest.raises(ValueError, match="several policies are loaded"):
        other.send(make_request("CreateContainer"))
    assert other.send(make_request("CreateContainer"), policy="label-env").warnings == [
        "pod default/pod has no example.com/team"]
    assert load_request(ROOT / "examples/requests/label-env-create.json")["uid"] == "label-env-1"


def test_state_carries_over_between_requests() -> None:
    """One runner is one server: an observer's bookkeeping is seen by later events."""
    policy = Policy("count")
    seen: list[str] = []

    @policy.observe(EventName.CREATE_CONTAINER)
    def remember(event: Event) -> None:
        seen.append(event.container.name if event.container else "")

    @policy.on(EventName.CREATE_CONTAINER)
    def number(event: Event) -> Decision:
        return Decision(adjust=Adjustment(env={"NTH": str(len(seen))}))

    runner = PolicyRunner(policy)
    replies = [runner.send(make_request("CreateContainer")).adjust for _ in range(3)]
    assert [r["env"][0]["value"] for r in replies] == ["1", "2", "3"]


@pytest.mark.processes
async def test_the_cli_replay_of_a_served_policy_agrees(tmp_path: Path) -> None:
    """Authors in other languages get the same check from `nri-webhook-bridge replay`."""
    assembly = assemble(ServerOptions(default_policies=False,
                                      policy_modules=(str(EXAMPLE / "downward_env.py"),)))
    async with serve_on_uds(assembly.app, tmp_path / "p.sock") as sock:
        async def replay(*extra: str) -> tuple[int, str]:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bridge", "replay", str(RECORDING), *extra,
                "--policy-url", f"unix://{sock}/v1/policies/downward-env",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=ROOT)
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
            return await proc.wait(), out.decode()

        code, out = await replay()
        assert code == 0 and out.rstrip().endswith("7 passed, 0 failed"), out
        expected = tmp_path / "expected.jsonl"
        records: list[dict[str, Any]] = [json.loads(line) for line in RECORDING.read_text()
                                         .splitlines()]  # fmt: skip
        create = next(r for r in records if r["event"] == "CreateContainer")
        expected.write_text(json.dumps({"request": create["request"], "reply": {}}) + "\n")
        code, out = await replay("--expected", str(expected))
        assert code == 1 and out.rstrip().endswith("6 passed, 1 failed"), out


def test_node_view_and_pushed_updates_after_a_replay() -> None:
    """The runner's node follows the recorded events; a policy's pushes are on the reply."""
    policy = Policy("pusher")

    @policy.on(EventName.REMOVE_CONTAINER)
    def push_on_removal(event: Event) -> Decision:
        return Decision(push=(ContainerUpdate("other", ResourcePatch(cpu_cpus="0-1")),))

    runner = PolicyRunner(policy)
    created = next(r for r in runner.events(RECORDING) if r["event"] == "CreateContainer")
    runner.send(created)
    assert [c.name for c in runner.node.containers.values()] == ["app"]
    removal = make_request("RemoveContainer", pod=created["pod"], container=created["container"])
    reply = runner.send(removal)
    assert reply.json == {} and reply.pushed == [
        {"container_id": "other", "linux": {"resources": {"cpu": {"cpus": "0-1"}}}}]
