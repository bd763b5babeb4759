"""The steps after the engine act on the Decision: the rdt_class rule and the warnings cap."""

from __future__ import annotations

from policy_server.engine.evaluate import MAX_WARNINGS
from policy_server.engine.reply import decision_to_reply
from policy_server.node.execution import ExecutorMode
from policy_server.node.executor import NodeExecutor
from policy_server.sdk.decision import Adjustment, Decision
from policy_server.sdk.effects import CgroupWrite, HostDirectory
from policy_server.sdk.resource_patch import ResourcePatch
from policy_server.service.request_steps import with_warnings, without_rdt_class


def test_an_rdt_class_whose_group_is_missing_leaves_the_decision_and_empty_parts_go() -> None:
    only = Decision(adjust=Adjustment(resources=ResourcePatch(rdt_class="g1")))
    assert decision_to_reply(without_rdt_class(only, ["g1"])) == {}
    both = Decision(adjust=Adjustment(resources=ResourcePatch(rdt_class="g1", cpu_shares=2)))
    assert decision_to_reply(without_rdt_class(both, ["g1"])) == {
        "adjust": {"linux": {"resources": {"cpu": {"shares": 2}}}}}
    assert without_rdt_class(both, ["g2"]) is both  # another group: left alone
    assert without_rdt_class(Decision(), ["g1"]) == Decision()


def test_warnings_are_appended_and_capped() -> None:
    decision = Decision(warnings=("a",))
    assert with_warnings(decision, ["b", "c"]).warnings == ("a", "b", "c")
    many = with_warnings(decision, [f"n{i}" for i in range(2 * MAX_WARNINGS)])
    assert len(many.warnings) == MAX_WARNINGS and many.warnings[:2] == ("a", "n0")


def test_effect_notes_say_what_was_not_applied_and_why() -> None:
    effects = (HostDirectory("/var/x", 0o755), CgroupWrite("kubepods/p1", "cpu.shares", 2))
    assert NodeExecutor(ExecutorMode.ON).notes(effects) == []
    off = NodeExecutor(ExecutorMode.OFF).notes(effects)
    assert off == ["host directory /var/x not created (executor off); the mount that needs it "
                   "will fail", "pod cgroup writes not applied (executor off): kubepods/p1: "
                   "cpu.shares=2"]
    assert "dry_run request" in NodeExecutor(ExecutorMode.ON).notes(effects, dry_run=True)[0]
