"""The effect registry (policy_server.sdk.effects): one table the merge, the notes and the node
executor share; a kind missing from either side is found at once."""

from __future__ import annotations

import pytest

from policy_server.node.execution import ExecutorMode
from policy_server.node.executor import NodeExecutor
from policy_server.sdk import Decision, merge
from policy_server.sdk.effects import (
    EFFECTS,
    CgroupWrite,
    Effect,
    EffectKind,
    EffectRegistry,
    HostDirectory,
    ResctrlGroup,
    ResctrlGroupRemoval,
    effect_notes,
    of_type,
)

WRITE = CgroupWrite("/kubepods/pod1", "cpu.shares", 2, "default/a")
DIRECTORY = HostDirectory("/usr/local/vgpu/containers/u_c", 0o777, "default/a")
GROUP = ResctrlGroup("koordlet-u", l3=((None, 0, 30),))
REMOVAL = ResctrlGroupRemoval("koordlet-u")


def test_every_effect_kind_is_registered_and_executed() -> None:
    assert EFFECTS.types() == {CgroupWrite, HostDirectory, ResctrlGroup, ResctrlGroupRemoval}
    assert set(NodeExecutor().kinds) == EFFECTS.types()


def test_an_unregistered_value_is_no_effect() -> None:
    with pytest.raises(TypeError, match="not a node effect: str"):
        EFFECTS.key("cpu.shares")
    with pytest.raises(ValueError, match="registered twice"):
        EffectRegistry([EffectKind(CgroupWrite, key=lambda w: ("", "")),
                        EffectKind(CgroupWrite, key=lambda w: ("", ""))])  # fmt: skip


def test_keys_make_the_merge_keep_one_request_each() -> None:
    again = CgroupWrite("/kubepods/pod1", "cpu.shares", 4, "default/a")
    merged = merge([
        ("a", Decision(effects=(WRITE, DIRECTORY, GROUP))),
        ("b", Decision(effects=(again, DIRECTORY, REMOVAL))),
    ])  # fmt: skip
    assert merged.decision.effects == (again, DIRECTORY, GROUP, REMOVAL)
    # Two values for one cgroup file conflict; asking twice for one directory does not.
    (conflict,) = merged.conflicts
    assert conflict.path == "effects[/kubepods/pod1].cpu.shares"
    assert (conflict.first_value, conflict.second_value) == (2, 4)
    # A group and its removal are different requests.
    assert EFFECTS.key(GROUP) != EFFECTS.key(REMOVAL)


def test_notes_say_what_was_not_applied_and_why() -> None:
    writes = [CgroupWrite(f"/kubepods/pod{i}", "cpu.shares", 2) for i in range(2)]
    assert effect_notes([GROUP, *writes, DIRECTORY, REMOVAL], "executor off") == [
        f"host directory {DIRECTORY.path} not created (executor off); the mount that needs it "
        "will fail",
        "pod cgroup writes not applied (executor off): /kubepods/pod0: cpu.shares=2",
        "pod cgroup writes not applied (executor off): /kubepods/pod1: cpu.shares=2",
    ]
    many = [CgroupWrite(f"/kubepods/pod{i}", "cpu.shares", 2) for i in range(4)]
    assert effect_notes(many, "dry_run request") == [
        "4 pod cgroup writes on 4 pods not applied (dry_run request)"
    ]
    assert effect_notes([GROUP, REMOVAL], "executor off") == []


def test_of_type_filters_by_kind() -> None:
    assert of_type([WRITE, GROUP, REMOVAL, GROUP], ResctrlGroup) == [GROUP, GROUP]


def test_the_executor_dispatches_through_its_table_in_every_mode() -> None:
    off = NodeExecutor(ExecutorMode.OFF).apply([WRITE, DIRECTORY, GROUP, REMOVAL])
    assert off.missing_groups == ["koordlet-u"] and not (off.written or off.logged)
    dry = NodeExecutor(ExecutorMode.DRY_RUN).apply([DIRECTORY, GROUP, REMOVAL])
    assert dry.logged == [
        f"mkdir {DIRECTORY.path} mode 777",
        "resctrl group koordlet-u",
        "remove resctrl group koordlet-u",
    ]


def test_the_executor_notes_what_it_does_not_apply() -> None:
    effects: list[Effect] = [WRITE, DIRECTORY]
    assert NodeExecutor(ExecutorMode.ON).notes(effects) == []
    assert NodeExecutor(ExecutorMode.ON).notes(effects, dry_run=True) == effect_notes(
        effects, "dry_run request")
    assert NodeExecutor(ExecutorMode.OFF).notes(effects) == effect_notes(effects, "executor off")
    assert NodeExecutor(ExecutorMode.DRY_RUN).notes(effects) == effect_notes(
        effects, "executor in dry-run mode")
