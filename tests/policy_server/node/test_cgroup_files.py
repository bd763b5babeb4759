"""Which cgroup v2 files a container's cgroup has, probed in fake trees shaped like /sys/fs/cgroup,
and what ``NodeFacts`` answers about them (known present, known absent, not known)."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy_server.node.cgroup_files import container_cgroup_files
from policy_server.node.cgroup_layout import CgroupVersion
from policy_server.node.executor import NodeExecutor
from policy_server.node.probe import node_facts
from policy_server.sdk.node_facts import NodeFacts
from tests.policy_server.factory import ANOLIS_V2_FILES, STOCK_V2_FILES, cgroup_v2_root

BVT = "cpu.bvt_warp_ns"


def test_a_stock_kernel_has_no_bvt_file_an_anolis_one_has(tmp_path: Path) -> None:
    stock = node_facts(NodeExecutor(root=cgroup_v2_root(tmp_path / "stock")))
    assert stock.cgroup_version == 2 and stock.cgroup_files == frozenset(STOCK_V2_FILES)
    assert not stock.has_cgroup_file(BVT) and stock.lacks_cgroup_file(BVT)
    assert stock.has_cgroup_file("cpu.idle") and not stock.lacks_cgroup_file("cpu.idle")
    anolis = node_facts(NodeExecutor(root=cgroup_v2_root(tmp_path / "anolis", ANOLIS_V2_FILES)))
    assert anolis.has_cgroup_file(BVT) and not anolis.lacks_cgroup_file(BVT)


def test_the_kubepods_cgroup_is_probed_not_the_root(tmp_path: Path) -> None:
    # The root has none of the per-cgroup knobs; kubepods (cgroupfs driver here) has them.
    root = cgroup_v2_root(tmp_path / "cg", ("cgroup.procs", "cpu.weight"), group="kubepods")
    assert not (root / "cpu.weight").exists()
    (root / BVT).write_text("0\n")  # whatever the root has, containers do not inherit files
    assert container_cgroup_files(root) == frozenset(
        {"cgroup.procs", "cpu.weight", "cgroup.controllers", "cgroup.subtree_control"})


def test_files_of_controllers_kubepods_does_not_pass_on_are_left_out(tmp_path: Path) -> None:
    root = cgroup_v2_root(tmp_path / "cg", ANOLIS_V2_FILES, passed_on="cpu memory pids")
    files = container_cgroup_files(root)
    assert files is not None
    assert {"io.weight", "cpuset.cpus", "cpuset.mems"}.isdisjoint(files)
    assert {BVT, "cpu.weight", "memory.max", "pids.max", "cgroup.procs"} <= files


def test_without_a_kubepods_cgroup_the_files_are_not_known(tmp_path: Path) -> None:
    facts = node_facts(NodeExecutor(root=cgroup_v2_root(tmp_path / "cg", None)))
    assert facts.cgroup_version == 2 and facts.cgroup_files is None
    # Not known: nothing is confirmed (koordinator-qos sends no bvt key) and nothing is known
    # to fail (the engine cannot tell, so it passes other policies' keys on).
    assert not facts.has_cgroup_file(BVT) and not facts.lacks_cgroup_file(BVT)


def test_cgroup_v1_lacks_every_unified_file(tmp_path: Path) -> None:
    (tmp_path / "cpu" / "kubepods").mkdir(parents=True)
    (tmp_path / "cpu" / "kubepods" / BVT).write_text("0\n")  # an Anolis v1 file, not unified
    facts = node_facts(NodeExecutor(root=tmp_path))
    assert facts == NodeFacts(cgroup_version=1)
    assert not facts.has_cgroup_file(BVT) and facts.lacks_cgroup_file(BVT)


def test_an_explicit_v2_without_a_tree_knows_no_files(tmp_path: Path) -> None:
    facts = node_facts(NodeExecutor(root=tmp_path / "none", version=CgroupVersion.V2))
    assert facts == NodeFacts(cgroup_version=2)


@pytest.mark.parametrize(
    ("facts", "has", "lacks"),
    [
        (NodeFacts(), False, False),
        (NodeFacts(cgroup_version=2), False, False),
        (NodeFacts(cgroup_version=1), False, True),
        (NodeFacts(cgroup_version=1, cgroup_files=frozenset({BVT})), False, True),
        (NodeFacts(cgroup_version=2, cgroup_files=frozenset({BVT})), True, False),
        (NodeFacts(cgroup_version=2, cgroup_files=frozenset({"cpu.idle"})), False, True),
        (NodeFacts(cgroup_files=frozenset({"cpu.idle"})), False, True),
    ],
)
def test_has_and_lacks_answer_only_what_is_known(facts: NodeFacts, has: bool, lacks: bool) -> None:
    assert (facts.has_cgroup_file(BVT), facts.lacks_cgroup_file(BVT)) == (has, lacks)
    assert facts.to_json()["cgroup_files"] == (
        None if facts.cgroup_files is None else sorted(facts.cgroup_files))
