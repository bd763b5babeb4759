"""Dry runs leave the server's state alone (issue 25): a ``dry_run`` request is answered as a
real one would be, from the engine's dry-run copy of the node view and of each policy's
registered state; dry runs build on each other, real requests never see them."""

from __future__ import annotations

from typing import Any

from policy_server.engine.evaluate import Engine
from policy_server.policies.koordinator_qos import build_policy
from policy_server.policies.koordinator_qos.baselines import QuotaBaselines
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.sdk import Decision, Event, EventName, Policy
from policy_server.sdk.registry import Registry
from policy_server.testing import PolicyRunner, make_request
from tests.policy_server.factory import evaluate_json

POD = {"id": "p1", "name": "web", "namespace": "shop", "uid": "u1",
       "linux": {"cgroup_parent": "/kubepods/burstable/podu1"}}  # fmt: skip


def ctr(cid: str, quota: int) -> dict[str, Any]:
    return {"id": cid, "pod_sandbox_id": "p1", "name": cid, "state": "CONTAINER_RUNNING",
            "linux": {"resources": {"cpu": {"shares": 512, "quota": quota, "period": 100000}}}}


class Seen:
    """A user policy's state: the container ids it was told about."""

    def __init__(self) -> None:
        self.ids: tuple[str, ...] = ()

    def snapshot(self) -> object:
        return self.ids

    def restore(self, snapshot: object) -> None:
        assert isinstance(snapshot, tuple)
        self.ids = snapshot


def counting_policy() -> tuple[Policy[None], Seen]:
    policy = Policy("counting")
    seen = policy.state(Seen())

    @policy.observe(EventName.CREATE_CONTAINER)
    def remember(event: Event) -> None:
        assert event.container is not None
        seen.ids = (*seen.ids, event.container.id)

    @policy.on(EventName.CREATE_CONTAINER)
    def answer(event: Event) -> Decision:
        return Decision(warnings=(f"seen {len(seen.ids)}",))

    return policy, seen


def test_registered_state_and_the_node_view_ignore_dry_runs() -> None:
    policy, seen = counting_policy()
    runner = PolicyRunner(policy)
    real = runner.send(make_request("CreateContainer", pod=POD, container=ctr("a", 0)))
    assert real.warnings == ["seen 1"]
    for n, cid in enumerate(("b", "c"), start=2):
        dry = runner.send(make_request("CreateContainer", pod=POD, container=ctr(cid, 0),
                                       dry_run=True))
        assert dry.warnings == [f"seen {n}"]  # the would-be answer, building on the last
    assert list(seen.ids) == ["a"]  # (not `== ("a",)`: mypy would keep seen.ids narrowed)
    assert set(runner.node.containers) == {"a"}
    runner.send(make_request("Synchronize", pods=[], containers=[], dry_run=True))
    runner.send(make_request("RemovePodSandbox", pod=POD, dry_run=True))
    assert set(runner.node.containers) == {"a"} and set(runner.node.pods) == {"p1"}
    real = runner.send(make_request("CreateContainer", pod=POD, container=ctr("d", 0)))
    assert real.warnings == ["seen 2"]
    assert seen.ids == ("a", "d")


def test_a_dry_run_keeps_what_the_real_view_knows_of_synchronized_pods() -> None:
    """A pod listed by a Synchronize leaves the real view with its last container (containerd
    sends no pod events for it after a restart: bridge.node_tables.fold); a dry run in
    between restores that knowledge with the rest of the real view."""
    policy, _ = counting_policy()
    runner = PolicyRunner(policy)
    runner.send(make_request("Synchronize", pods=[POD], containers=[ctr("a", 0)]))
    runner.send(make_request("CreateContainer", pod=POD, container=ctr("b", 0), dry_run=True))
    assert set(runner.node.pods) == {"p1"}
    runner.send(make_request("RemoveContainer", pod=POD, container=ctr("a", 0)))
    assert set(runner.node.pods) == set() and set(runner.node.containers) == set()


def test_a_dry_run_synchronize_starts_the_dry_copy_afresh() -> None:
    policy, seen = counting_policy()
    runner = PolicyRunner(policy)
    runner.send(make_request("CreateContainer", pod=POD, container=ctr("a", 0), dry_run=True))
    runner.send(make_request("CreateContainer", pod=POD, container=ctr("b", 0)))
    runner.send(make_request("Synchronize", pods=[], containers=[], dry_run=True))
    # The copy is the real state again (b), not the earlier dry run's (a).
    dry = runner.send(make_request("CreateContainer", pod=POD, container=ctr("c", 0),
                                   dry_run=True))
    assert dry.warnings == ["seen 2"]
    assert seen.ids == ("b",)


def test_koordinator_quota_baselines_ignore_dry_runs() -> None:
    store = QuotaBaselines()
    registry = Registry()
    registry.add(build_policy(Rules, store))
    engine = Engine(registry, always_fold=True)  # koordinator-qos does not read the node view

    def send(event: str, dry_run: bool, **payload: Any) -> None:
        evaluate_json(engine, "koordinator-qos",
                             make_request(event, dry_run=dry_run, pod=POD, **payload))

    send("CreateContainer", False, container=ctr("a", 50000))
    send("CreateContainer", True, container=ctr("b", 70000))
    send("UpdateContainer", True, container=ctr("a", 50000),
         linux_resources={"cpu": {"quota": 90000}})
    send("RemoveContainer", True, container=ctr("a", 50000))
    evaluate_json(engine, "koordinator-qos", make_request("Synchronize", pods=[], containers=[],
                                                         dry_run=True))
    assert dict(store.view()) == {"a": 50000}
    assert set(engine.node.containers) == {"a"}
    send("UpdateContainer", False, container=ctr("a", 50000),
         linux_resources={"cpu": {"quota": 80000}})
    assert dict(store.view()) == {"a": 80000}
