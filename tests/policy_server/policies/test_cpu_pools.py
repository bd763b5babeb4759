"""cpu-pools: exclusive CPUs for Guaranteed containers, the shared pool follows, restarts rebuild.

Driven through the policy test kit (``PolicyRunner``), as a policy author would test it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policy_server.exceptions import PolicyLoadError
from policy_server.policies.cpu_pools.allocator import take
from policy_server.policies.cpu_pools.topology import TopologyError, from_layout, from_sysfs
from policy_server.sdk.decision_json import update_to_json
from policy_server.testing import PolicyRunner, Reply, make_request

# Two NUMA nodes of four CPUs; CPU 0 reserved for the shared pool.
CONFIG = {"layout": {0: "0-3", 1: "4-7"}, "reserved_cpus": "0"}
GUARANTEED = "/kubepods/pod{uid}"
BURSTABLE = "/kubepods/burstable/pod{uid}"


def pod(pod_id: str, parent: str = GUARANTEED) -> dict[str, Any]:
    return {"id": pod_id, "name": pod_id, "uid": pod_id, "namespace": "default",
            "linux": {"cgroup_parent": parent.format(uid=pod_id)}}  # fmt: skip


def container(
    cid: str, pod_id: str, cpus: int = 0, cpuset: str | None = None, state: str = ""
) -> dict[str, Any]:
    """``cpus`` whole CPUs requested and limited (Guaranteed); 0: no CPU limit."""
    cpu: dict[str, Any] = {"shares": 1024 * cpus if cpus else 512}
    if cpus:
        cpu.update(quota=100000 * cpus, period=100000)
    if cpuset is not None:
        cpu["cpus"] = cpuset
    out = {"id": cid, "pod_sandbox_id": pod_id, "name": cid,
           "linux": {"resources": {"cpu": cpu}}}  # fmt: skip
    if state:
        out["state"] = state
    return out


class Node:
    """A runner plus the pods/containers the test has created, to build requests."""

    def __init__(self, runner: PolicyRunner | None = None, **config: Any) -> None:
        self.runner = runner or PolicyRunner.builtin("cpu-pools", {**CONFIG, **config})
        self.pods: dict[str, dict[str, Any]] = {}
        self.count = 0

    def send(self, event: str, **payload: Any) -> Reply:
        self.count += 1
        return self.runner.send(make_request(event, uid=f"u{self.count}", **payload))

    def sync(self, *items: tuple[dict[str, Any], dict[str, Any]]) -> Reply:
        pods = {p["id"]: p for p, _ in items}
        return self.send("Synchronize", pods=list(pods.values()), containers=[c for _, c in items])

    def create(self, p: dict[str, Any], c: dict[str, Any], dry_run: bool = False) -> Reply:
        return self.send("CreateContainer", pod=p, container=c, dry_run=dry_run)


def cpus_of(reply: Reply) -> str | None:
    cpu = reply.adjust.get("linux", {}).get("resources", {}).get("cpu", {})
    cpus = cpu.get("cpus")
    assert cpus is None or isinstance(cpus, str)
    return cpus


def moved(reply: Reply) -> dict[str, str]:
    return {u["container_id"]: u["linux"]["resources"]["cpu"]["cpus"] for u in reply.update}


def pushed(reply: Reply) -> dict[str, str]:
    return {
        u["container_id"]: u["linux"]["resources"]["cpu"]["cpus"]
        for u in map(update_to_json, reply.evaluation.decision.push)
    }


SHARED_POD = pod("shared")
S1 = container("s1", "shared", cpuset="0-7", state="CONTAINER_RUNNING")
S2 = container("s2", "shared", cpuset="0-7", state="CONTAINER_RUNNING")


def test_exclusive_containers_shrink_and_grow_the_shared_pool() -> None:
    node = Node()
    assert node.sync((SHARED_POD, S1), (SHARED_POD, S2)).no_change  # already on the pool

    # 2 CPUs fit both NUMA nodes; node 0 has fewer free (1-3): best fit.
    x1 = node.create(pod("g1"), container("x1", "g1", cpus=2))
    assert cpus_of(x1) == "1-2"
    assert moved(x1) == {"s1": "0,3-7", "s2": "0,3-7"}
    # 3 CPUs no longer fit node 0 (only 3 left there): node 1.
    x2 = node.create(pod("g2"), container("x2", "g2", cpus=3))
    assert cpus_of(x2) == "4-6"
    assert moved(x2) == {"s1": "0,3,7", "s2": "0,3,7"}  # x1 is not moved

    # A Burstable pod with a whole CPU, and a Guaranteed one with a fractional CPU, share.
    b = node.create(pod("b", BURSTABLE), container("b", "b", cpus=1))
    assert cpus_of(b) == "0,3,7" and not b.update
    frac = container("f", "g3")
    frac["linux"]["resources"]["cpu"].update(quota=150000, period=100000, shares=1536)
    assert cpus_of(node.create(pod("g3"), frac)) == "0,3,7"

    # StopContainer gives x1's CPUs back; its reply moves every shared container (not x2).
    stop = node.send("StopContainer", pod=pod("g1"), container=container("x1", "g1", cpus=2))
    assert moved(stop) == {c: "0-3,7" for c in ("s1", "s2", "b", "f")}
    # RemoveContainer after the stop changes nothing more.
    assert node.send("RemoveContainer", pod=pod("g1"), container=container("x1", "g1")).no_change


def test_removal_without_stop_pushes_through_the_bridge() -> None:
    node = Node()
    node.sync((SHARED_POD, S1))
    node.create(pod("g1"), container("x1", "g1", cpus=1))
    remove = node.send("RemoveContainer", pod=pod("g1"), container=container("x1", "g1"))
    assert remove.no_change  # RemoveContainer's reply cannot carry updates...
    assert pushed(remove) == {"s1": "0-7"}  # ... so they are pushed

    node.create(pod("g2"), container("x2", "g2", cpus=1))
    gone = node.send("RemovePodSandbox", pod=pod("g2"))
    assert pushed(gone) == {"s1": "0-7"}


def test_requests_that_do_not_fit_are_refused_with_the_reason() -> None:
    node = Node()
    node.sync((SHARED_POD, S1))
    # 8 CPUs, 1 reserved, and the shared pool keeps 1 (the reserved one): 7 can be given.
    refused = node.create(pod("big"), container("big", "big", cpus=8))
    assert refused.reject is not None
    assert "needs 8 exclusive CPUs, 7 can be given" in refused.reject
    assert "reserved: 0" in refused.reject
    assert cpus_of(node.create(pod("g7"), container("x", "g7", cpus=7))) == "1-7"
    last = node.create(pod("g1"), container("y", "g1", cpus=1))
    assert last.reject is not None and "0 can be given (free: none" in last.reject


def test_exclusive_cpus_are_refused_until_the_node_has_been_seen() -> None:
    node = Node()
    reply = node.create(pod("g1"), container("x1", "g1", cpus=1))
    assert reply.reject is not None and "no Synchronize" in reply.reject
    # A shared container is fine: it only follows the pool.
    assert cpus_of(node.create(SHARED_POD, container("s", "shared"))) == "0-7"


def test_restart_rebuilds_the_allocation_from_synchronize() -> None:
    first = Node()
    first.sync((SHARED_POD, S1))
    assert cpus_of(first.create(pod("g1"), container("x1", "g1", cpus=2))) == "1-2"

    # A new server: what the runtime reports is all it knows.
    second = Node()
    reply = second.sync(
        (SHARED_POD, container("s1", "shared", cpuset="0,3-7", state="CONTAINER_RUNNING")),
        (pod("g1"), container("x1", "g1", cpus=2, cpuset="1-2", state="CONTAINER_RUNNING")),
    )
    assert reply.no_change  # x1 keeps its CPUs, s1 is already on the pool
    # The next exclusive container does not get x1's CPUs.
    assert cpus_of(second.create(pod("g2"), container("x2", "g2", cpus=1))) == "3"


def test_synchronize_repairs_what_is_wrong() -> None:
    node = Node()
    reply = node.sync(
        (SHARED_POD, container("s1", "shared", cpuset="0-7", state="CONTAINER_RUNNING")),
        # Guaranteed with 1 CPU but on all of them (created before the policy ran).
        (pod("g1"), container("x1", "g1", cpus=1, cpuset="0-7", state="CONTAINER_RUNNING")),
        # Two containers claiming the same CPU: the first keeps it.
        (pod("g2"), container("x2", "g2", cpus=1, cpuset="5", state="CONTAINER_RUNNING")),
        (pod("g3"), container("x3", "g3", cpus=1, cpuset="5", state="CONTAINER_RUNNING")),
        (SHARED_POD, container("old", "shared", cpuset="0-7", state="CONTAINER_STOPPED")),
    )
    assert moved(reply) == {"s1": "0,3-4,6-7", "x1": "1", "x3": "2"}


def test_dry_runs_build_on_each_other() -> None:
    """A shadow webhook or a replay sends every event as a dry run: each builds on the last."""
    node = Node()
    node.sync((SHARED_POD, S1))
    assert cpus_of(node.create(pod("g1"), container("x1", "g1", cpus=1), dry_run=True)) == "1"
    assert cpus_of(node.create(pod("g2"), container("x2", "g2", cpus=1), dry_run=True)) == "2"


def test_dry_run_creates_leave_the_real_table_alone() -> None:
    """Issue 25: `try` against a live server took CPUs another pod then got again. A dry-run
    create answers with the CPUs a real one would get, and the next real create gets them."""
    node = Node()
    node.sync((SHARED_POD, S1))
    assert cpus_of(node.create(pod("g1"), container("x1", "g1", cpus=1), dry_run=True)) == "1"
    assert cpus_of(node.create(pod("g2"), container("x2", "g2", cpus=1), dry_run=True)) == "2"
    real = node.create(pod("g3"), container("x3", "g3", cpus=1))
    assert cpus_of(real) == "1"
    assert moved(real) == {"s1": "0,2-7"}  # the real node view holds S1 only
    assert set(node.runner.node.containers) == {"s1", "x3"}
    assert cpus_of(node.create(pod("g4"), container("x4", "g4", cpus=1))) == "2"


def test_dry_run_sync_and_removal_change_nothing_real() -> None:
    node = Node()
    node.sync((SHARED_POD, S1))
    x1 = container("x1", "g1", cpus=1)
    assert cpus_of(node.create(pod("g1"), x1)) == "1"
    # A dry-run Synchronize of an empty node (what `try` starts with) frees every CPU there...
    assert node.send("Synchronize", pods=[], containers=[], dry_run=True).no_change
    assert cpus_of(node.create(pod("g2"), container("x2", "g2", cpus=1), dry_run=True)) == "1"
    # ...and a dry-run stop of x1 answers with the shared pool it would free.
    stop = node.send("StopContainer", pod=pod("g1"), container={**x1, "state":
                                                                "CONTAINER_RUNNING"},
                     dry_run=True)
    assert stop.no_change  # the dry-run copy knows no x1 since its Synchronize
    stop = node.send("StopContainer", pod=SHARED_POD, container=S1, dry_run=True)
    assert stop.no_change
    # The real node: x1 still holds CPU 1, S1 still runs.
    assert set(node.runner.node.containers) == {"s1", "x1"}
    assert cpus_of(node.create(pod("g3"), container("x3", "g3", cpus=1))) == "2"


def test_dry_run_stop_answers_as_a_real_one_would() -> None:
    node = Node()
    node.sync((SHARED_POD, S1))
    x1 = container("x1", "g1", cpus=1)
    node.create(pod("g1"), x1)
    running = {**x1, "state": "CONTAINER_RUNNING"}
    dry = node.send("StopContainer", pod=pod("g1"), container=running, dry_run=True)
    assert moved(dry) == {"s1": "0-7"}  # CPU 1 would go back to the shared pool
    dry_remove = node.send("RemoveContainer", pod=pod("g1"), container=running, dry_run=True)
    assert dry_remove.no_change
    # Really, x1 still holds CPU 1: a real stop frees it now.
    assert moved(node.send("StopContainer", pod=pod("g1"), container=running)) == {"s1": "0-7"}


def test_update_container_keeps_the_pool() -> None:
    node = Node()
    node.sync((SHARED_POD, S1))
    node.create(pod("g1"), container("x1", "g1", cpus=1))
    reply = node.send(
        "UpdateContainer",
        pod=pod("g1"),
        container=container("x1", "g1", cpus=1, cpuset="1"),
        linux_resources={"cpu": {"cpus": "0-7"}},
    )
    assert moved(reply) == {"x1": "1"}
    same = node.send(
        "UpdateContainer",
        pod=SHARED_POD,
        container=S1,
        linux_resources={"cpu": {"cpus": "0,2-7"}},
    )
    assert same.no_change


def test_memory_is_pinned_to_the_numa_nodes_when_asked() -> None:
    node = Node(pin_memory=True)
    node.sync((SHARED_POD, S1))
    reply = node.create(pod("g1"), container("x1", "g1", cpus=4))
    cpu = reply.adjust["linux"]["resources"]["cpu"]
    assert cpu == {"cpus": "4-7", "mems": "1"}


# --- topology and allocation -----------------------------------------------------------------


def fake_sysfs(root: Path, nodes: dict[int, list[int]], threads: int = 2) -> Path:
    cpus = sorted(c for cs in nodes.values() for c in cs)
    root.mkdir(parents=True, exist_ok=True)
    (root / "online").write_text(f"{cpus[0]}-{cpus[-1]}\n")
    for node, members in nodes.items():
        for cpu in members:
            d = root / f"cpu{cpu}"
            (d / "topology").mkdir(parents=True)
            (d / f"node{node}").mkdir()  # a symlink in the real sysfs; only the name counts
            (d / "topology" / "physical_package_id").write_text(f"{node}\n")
            (d / "topology" / "core_id").write_text(f"{cpu // threads}\n")
    return root


def test_sysfs_topology_and_whole_cores_first(tmp_path: Path) -> None:
    root = fake_sysfs(tmp_path / "cpu", {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]})
    topology = from_sysfs(root)
    assert dict(topology.nodes) == {0: frozenset({0, 1, 2, 3}), 1: frozenset({4, 5, 6, 7})}
    assert topology.siblings(2) == {2, 3}
    # CPU 1 in use: core (0,1) is split, so a 1-CPU request takes its free thread 0 and a
    # 2-CPU request takes the whole core 2-3.
    free = frozenset({0, 2, 3, 4, 5, 6, 7})
    assert take(topology, free, 1) == frozenset({0})
    assert take(topology, free, 2) == frozenset({2, 3})
    # Too big for one node: the emptiest node first, then the next.
    assert take(topology, free, 6) == frozenset({4, 5, 6, 7, 2, 3})
    assert take(topology, free, 8) is None
    # With two real NUMA nodes, exclusive containers get their memory node too.
    runner = PolicyRunner.builtin("cpu-pools", {"sysfs": str(root)})
    node = Node(runner)
    node.sync((SHARED_POD, S1))
    reply = node.create(pod("g1"), container("x1", "g1", cpus=2))
    assert reply.adjust["linux"]["resources"]["cpu"] == {"cpus": "0-1", "mems": "0"}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"layout": {0: "0-3"}, "colour": 1}, "colour: unknown key"),
        ({"layout": {0: "0-3", 1: "3-4"}}, "CPU 3 is in two NUMA nodes"),
        ({"layout": {"x": "0"}}, "NUMA node 'x' is not a number"),
        ({"layout": {0: "0-"}}, "layout.0: invalid cpu list"),
        ({"layout": {0: "0-3"}, "reserved_cpus": "9"}, "reserved_cpus: CPUs 9 are not in"),
        ({"layout": {0: "0-3"}, "min_shared_cpus": 0}, "min_shared_cpus: expected an integer"),
        ({"layout": {0: "0-3"}, "min_shared_cpus": 5}, "the node has only 4 CPUs"),
        ({"layout": {0: "0-3"}, "pin_memory": "yes"}, "pin_memory: expected true or false"),
        ({"layout": {0: "0"}, "sysfs": "/x"}, "either layout or sysfs"),
        ({"sysfs": "/nonexistent"}, "cannot read /nonexistent/online"),
    ],
)
def test_bad_configuration_is_refused_with_the_key(config: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyLoadError, match="policy cpu-pools") as info:
        PolicyRunner.builtin("cpu-pools", config)
    assert message in str(info.value)


def test_layout_must_name_a_node() -> None:
    with pytest.raises(TopologyError, match="names no NUMA node"):
        from_layout({})


def test_shipped_fixtures_give_the_documented_replies() -> None:
    """The curl walk-through of docs/policies/cpu-pools.md, in order."""
    root = Path(__file__).parents[3]
    runner = PolicyRunner.builtin("cpu-pools", root / "examples/policies/cpu-pools.yaml")

    def send(name: str) -> Reply:
        return runner.send(root / "examples/requests" / f"cpu-pools-{name}.json")

    def cpus(cpuset: str) -> dict[str, Any]:
        return {"linux": {"resources": {"cpu": {"cpus": cpuset}}}}

    assert send("synchronize").json == {"update": [
        {"container_id": "c-web", **cpus("0,3-7")}, {"container_id": "c-db", **cpus("1-2")}]}
    assert send("create-exclusive").json == {
        "adjust": cpus("4-6"), "update": [{"container_id": "c-web", **cpus("0,3,7")}]}
    assert send("create-shared").json == {"adjust": cpus("0,3,7")}
    assert send("stop-exclusive").json == {"update": [
        {"container_id": "c-web", **cpus("0,3-7")}, {"container_id": "c-batch", **cpus("0,3-7")}]}
