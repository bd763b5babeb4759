"""The settle step: the rdt_class rule, warnings fitted once at the encoder, effect notes."""

from __future__ import annotations

from policy_server.engine.reply import decision_to_reply
from policy_server.node.execution import ExecutorMode
from policy_server.node.executor import NodeExecutor
from policy_server.sdk.decision import Adjustment, Decision
from policy_server.sdk.effects import CgroupWrite, HostDirectory
from policy_server.sdk.limit_checks import MAX_WARNINGS
from policy_server.sdk.resource_patch import ResourcePatch
from policy_server.service.settle import without_rdt_class


def test_an_rdt_class_whose_group_is_missing_leaves_the_decision_and_empty_parts_go() -> None:
    only = Decision(adjust=Adjustment(resources=ResourcePatch(rdt_class="g1")))
    assert decision_to_reply(without_rdt_class(only, ["g1"])) == {}
    both = Decision(adjust=Adjustment(resources=ResourcePatch(rdt_class="g1", cpu_shares=2)))
    assert decision_to_reply(without_rdt_class(both, ["g1"])) == {
        "adjust": {"linux": {"resources": {"cpu": {"shares": 2}}}}}
    assert without_rdt_class(both, ["g2"]) is both  # another group: left alone
    assert without_rdt_class(Decision(), ["g1"]) == Decision()


def test_notes_follow_the_decisions_warnings_and_the_encoder_fits_them_once() -> None:
    decision = Decision(warnings=("a",))
    assert decision_to_reply(decision, ("b", "c"))["warnings"] == ["a", "b", "c"]
    many = decision_to_reply(decision, tuple(f"n{i}" for i in range(2 * MAX_WARNINGS)))
    warnings = many["warnings"]
    assert len(warnings) == MAX_WARNINGS and warnings[:2] == ["a", "n0"]
    # 1 + 200 warnings, 99 kept: the 100th says how many went.
    assert warnings[-1] == f"... and {2 * MAX_WARNINGS + 1 - (MAX_WARNINGS - 1)} more warnings"


def test_effect_notes_say_what_was_not_applied_and_why() -> None:
    effects = (HostDirectory("/var/x", 0o755), CgroupWrite("kubepods/p1", "cpu.shares", 2))
    assert NodeExecutor(ExecutorMode.ON).notes(effects) == []
    off = NodeExecutor(ExecutorMode.OFF).notes(effects)
    assert off == ["host directory /var/x not created (executor off); the mount that needs it "
                   "will fail", "pod cgroup writes not applied (executor off): kubepods/p1: "
                   "cpu.shares=2"]
    assert "dry_run request" in NodeExecutor(ExecutorMode.ON).notes(effects, dry_run=True)[0]
