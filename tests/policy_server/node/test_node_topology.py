"""The node's topology from a fake sysfs/procfs (issue 45.1): what rules are checked against."""

from __future__ import annotations

from pathlib import Path

from policy_server.node.node_topology import read_topology
from policy_server.sdk import NodeTopology


def node_tree(root: Path, online: str = "0-1", nodes: dict[int, str] | None = None,
              mem_kb: int | None = 2048) -> tuple[Path, Path]:
    system = root / "sys" / "devices" / "system"
    (system / "cpu").mkdir(parents=True)
    (system / "cpu" / "online").write_text(online + "\n")
    if nodes is not None:
        (system / "node").mkdir()
        (system / "node" / "online").write_text(",".join(map(str, sorted(nodes))) + "\n")
        for n, cpus in nodes.items():
            (system / "node" / f"node{n}").mkdir()
            (system / "node" / f"node{n}" / "cpulist").write_text(cpus + "\n")
    (root / "proc").mkdir()
    if mem_kb is not None:
        (root / "proc" / "meminfo").write_text(f"MemTotal:       {mem_kb} kB\nMemFree: 1 kB\n")
    return root / "sys", root / "proc"


def test_cpus_numa_nodes_and_memory_are_read(tmp_path: Path) -> None:
    topo = read_topology(*node_tree(tmp_path, "0-15", {0: "0-7", 1: "8-15"}))
    assert topo.cpus == frozenset(range(16))
    assert topo.mems == frozenset({0, 1})
    assert dict(topo.node_cpus) == {0: frozenset(range(8)), 1: frozenset(range(8, 16))}
    assert topo.memory_bytes == 2048 * 1024


def test_a_kernel_without_numa_has_one_memory_node(tmp_path: Path) -> None:
    topo = read_topology(*node_tree(tmp_path, "0-1"))
    assert (topo.cpus, topo.mems) == (frozenset({0, 1}), frozenset({0}))


def test_what_cannot_be_read_is_not_known_and_bounds_nothing(tmp_path: Path) -> None:
    topo = read_topology(tmp_path / "nothing", tmp_path / "nothing")
    assert topo == NodeTopology()
    assert topo.cpus_problem("0-1023") is None
    bad = read_topology(*node_tree(tmp_path, "0-x", mem_kb=None))
    assert bad.cpus is None and bad.memory_bytes is None


def test_problems_name_what_the_node_lacks() -> None:
    topo = NodeTopology(cpus=frozenset({0, 1}), mems=frozenset({0}))
    assert topo.cpus_problem("0-1") is None and topo.cpus_problem("1") is None
    assert topo.cpus_problem("0-15") == ("'0-15' names CPUs 2-15 the node does not have (its "
                                         "online CPUs: 0-1)")
    assert topo.cpus_problem("2") is not None  # just outside
    assert topo.mems_problem("0") is None
    assert "memory node 1" in (topo.mems_problem("1") or "")
