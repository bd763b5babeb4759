"""The SDK's node view (pods and containers kept current from every request) and pushed updates."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import httpx
import pytest

from policy_server import (
    Adjustment,
    ContainerUpdate,
    Decision,
    Event,
    EventName,
    NodeFacts,
    Policy,
    ResourcePatch,
)
from policy_server.bridge_link.control_client import BridgeControl
from policy_server.engine.evaluate import Engine
from policy_server.exceptions import PolicyLoadError
from policy_server.sdk.node_view import NodeView
from policy_server.sdk.registry import Registry
from policy_server.service import PolicyServer, ServerOptions
from policy_server.testing import PolicyRunner
from tests.policy_server.factory import (
    STOCK_V2,
    cgroup_v2_root,
    container,
    envelope,
    evaluate_json,
    event,
    pod,
    reply_of,
    request,
)

SEEN: list[tuple[str, tuple[str, ...], bool]] = []


def recorder() -> Policy[None]:
    """Records, per event, the container ids its handler saw in the view."""
    policy = Policy("recorder")
    events = [e for e in EventName if e is not EventName.VALIDATE_CONTAINER_ADJUSTMENT]

    @policy.on(*events)
    def look(event: Event, *, node: NodeView) -> None:
        SEEN.append((event.name.value, tuple(node.containers), node.synced))

    return policy


def engine_with(*policies: Policy[Any]) -> Engine:
    registry = Registry()
    for p in policies:
        registry.add(p)
    return Engine(registry)


def test_view_follows_synchronize_and_lifecycle_events() -> None:
    SEEN.clear()
    engine = engine_with(recorder())
    p1, p2 = pod(pod_id="p1"), pod(pod_id="p2", uid="u2")
    evaluate_json(engine,
        "recorder",
        envelope(
            "Synchronize",
            pods=[p1],
            containers=[container(cid="a", pod_id="p1"), container(cid="b", pod_id="p1")],
        ),
    )
    created = container(cid="c", pod_id="p2", state="CONTAINER_UNKNOWN")
    evaluate_json(engine, "recorder", envelope("CreateContainer", pod=p2, container=created))
    view = engine.node.view
    # The state the event implies, not the one the runtime had when it asked.
    assert view.containers["c"].state == "CONTAINER_CREATED"
    assert view.pod_of(view.containers["c"]) is not None
    stop = envelope("StopContainer", pod=p1, container=container(cid="a"))
    evaluate_json(engine, "recorder", stop)
    assert view.containers["a"].state == "CONTAINER_STOPPED"
    assert [c.id for c in view.live_containers()] == ["b", "c"]
    evaluate_json(engine,
        "recorder", envelope("RemoveContainer", pod=p1, container=container(cid="a"))
    )
    evaluate_json(engine, "recorder", envelope("RemovePodSandbox", pod=p1))
    assert SEEN == [
        ("Synchronize", ("a", "b"), True),
        ("CreateContainer", ("a", "b", "c"), True),
        ("StopContainer", ("a", "b", "c"), True),
        ("RemoveContainer", ("b", "c"), True),
        # Removing the pod drops the containers the runtime never reported removed.
        ("RemovePodSandbox", ("c",), True),
    ]
    assert set(view.pods) == {"p2"} and view.containers_of("p2")[0].id == "c"


def test_view_is_read_only_and_unsynced_until_synchronize() -> None:
    engine = engine_with(recorder())
    view = engine.node.view
    assert not view.synced and len(view.containers) == 0
    evaluate_json(engine,
        "recorder", envelope("CreateContainer", pod=pod(), container=container(cid="x"))
    )
    assert not view.synced and list(view.containers) == ["x"]
    assert isinstance(view.containers, MappingProxyType)
    with pytest.raises(TypeError):
        view.containers["y"] = view.containers["x"]  # type: ignore[index]


def test_observers_and_two_argument_handlers_get_the_view() -> None:
    policy: Policy[str] = Policy("ctx", context=lambda: "rules")
    observed: list[int] = []

    @policy.observe(EventName.CREATE_CONTAINER)
    def count(event: Event, *, node: NodeView) -> None:
        observed.append(len(node.containers))

    @policy.on(EventName.CREATE_CONTAINER)
    def handler(event: Event, rules: str, *, node: NodeView) -> Decision:
        return Decision(warnings=(f"{rules}: {len(node.containers)} containers",))

    engine = engine_with(policy)
    reply = reply_of(evaluate_json(engine,
        "ctx", envelope("CreateContainer", pod=pod(), container=container())
    ))
    assert observed == [1]
    assert reply == {"warnings": ["rules: 1 containers"]}
    # Called without an engine (e.g. directly in a test), the handler gets an empty view.
    spec = policy.handlers_for(EventName.CREATE_CONTAINER)[0]
    direct = spec.call(event("CreateContainer", pod=pod(), container=container()), "r")
    assert direct == Decision(warnings=("r: 0 containers",))


# --- pushed updates -----------------------------------------------------------------------


def pusher_policy() -> Policy[None]:
    """At RemoveContainer (whose reply cannot carry updates) push one to a sibling."""
    policy = Policy("pusher")

    @policy.on(EventName.REMOVE_CONTAINER)
    def grow(event: Event) -> Decision:
        upd = ContainerUpdate("sibling", ResourcePatch(cpu_cpus="0-3"))
        return Decision(push=(upd,))

    return policy


class Bridge:
    def __init__(self, status: int = 200) -> None:
        self.pushed: list[list[dict[str, Any]]] = []
        self.status = status

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/readyz":
            return httpx.Response(200, json={"ready": True})
        if request.url.path == "/v1/state":
            return httpx.Response(200, json={"pods": [], "containers": []})
        self.pushed.append(json.loads(request.content)["update"])
        return httpx.Response(self.status, json={"failed": []})


def server_with(bridge: Bridge | None) -> PolicyServer:
    control = None
    if bridge is not None:
        control = BridgeControl("http://bridge", transport=httpx.MockTransport(bridge.handle))
    return PolicyServer(ServerOptions(default_policies=False), [pusher_policy()], bridge=control)


REMOVE = envelope("RemoveContainer", pod=pod(), container=container())
SIBLING = {"container_id": "sibling", "linux": {"resources": {"cpu": {"cpus": "0-3"}}}}


async def test_push_goes_through_the_bridge_after_the_reply() -> None:
    bridge = Bridge()
    server = server_with(bridge)
    evaluation = await server.handle("pusher", request(REMOVE))
    assert evaluation.reply == {}  # the push is not part of the reply
    assert server.pusher is not None
    await server.pusher.join()
    assert bridge.pushed == [[SIBLING]]
    assert "policy_pushed_updates_total 1.0" in server.metrics.render().decode()
    await server.aclose()


async def test_push_without_bridge_or_in_dry_run_is_reported_not_sent() -> None:
    server = server_with(None)
    reply = (await server.handle("pusher", request(REMOVE))).reply
    assert reply == {"warnings": ["1 pushed updates not sent: no --bridge-control"]}
    bridge = Bridge()
    server = server_with(bridge)
    reply = (await server.handle("pusher", request({**REMOVE, "dry_run": True}))).reply
    assert reply == {"warnings": ["1 pushed updates not sent: dry_run request"]}
    await server.aclose()
    assert bridge.pushed == []


async def test_push_to_a_failing_bridge_is_retried_then_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("policy_server.bridge_link.pusher.PUSH_RETRY_S", 0.0)
    bridge = Bridge(status=503)
    server = server_with(bridge)
    await server.handle("pusher", request(REMOVE))
    assert server.pusher is not None
    await server.pusher.join()
    assert len(bridge.pushed) == 3  # PUSH_ATTEMPTS, then logged and dropped
    await server.aclose()


async def test_synchronize_policies_are_resynced_from_the_bridge_state() -> None:
    """A restarted server rebuilds its node view from the bridge's GET /v1/state."""
    policy = Policy("sync")

    @policy.on(EventName.SYNCHRONIZE)
    def sync(event: Event, *, node: NodeView) -> None:  # a reader: the view is kept
        return None

    bridge = Bridge()
    control = BridgeControl("http://bridge", transport=httpx.MockTransport(bridge.handle))
    server = PolicyServer(ServerOptions(default_policies=False), [policy], bridge=control)
    assert server.resync_policies == ("sync",)
    assert not server.engine.node.synced
    assert await server.resync.run_pass()
    assert server.engine.node.synced
    await server.aclose()


def test_a_positional_node_parameter_is_refused() -> None:
    policy = Policy("p")
    with pytest.raises(PolicyLoadError, match=r"must declare node keyword-only"):
        policy.on(EventName.CREATE_CONTAINER)(lambda event, node: None)
    with pytest.raises(PolicyLoadError, match=r"must declare node keyword-only"):
        policy.observe(EventName.CREATE_CONTAINER)(lambda event, node: None)


def test_every_policy_sees_the_node_facts_the_server_found(tmp_path: Any) -> None:
    # Any author's handler (not only koordinator-qos) can ask what the node accepts.
    seen: list[NodeFacts] = []
    policy = Policy("facts")

    @policy.on(EventName.CREATE_CONTAINER)
    def look(event: Event, *, node: NodeView) -> Decision | None:
        seen.append(node.facts)
        if node.facts.unified_allowed:
            return Decision(adjust=Adjustment(resources=ResourcePatch(unified={"cpu.idle": "1"})))
        return None

    create = envelope("CreateContainer", pod=pod(), container=container())
    v1 = PolicyRunner(policy, facts=NodeFacts(cgroup_version=1))
    assert v1.send(create).json == {}
    (tmp_path / "cpu").mkdir()  # a cgroup v1 tree: the server detects it and says so
    server = PolicyServer(ServerOptions(cgroup_root=tmp_path), [policy])
    assert reply_of(evaluate_json(server.engine, "facts", create)) == {}
    assert PolicyRunner(policy).send(create).json == {
        "adjust": {"linux": {"resources": {"unified": {"cpu.idle": "1"}}}}}
    assert seen == [NodeFacts(1), NodeFacts(1), NodeFacts()]


IDLE = {"cpu.idle": "1"}


def test_unified_keys_of_any_policy_are_dropped_on_cgroup_v1_with_a_warning() -> None:
    # A policy that does not look at node.facts: the engine keeps its other values and says
    # what it dropped (runc would refuse the container, or the whole update).
    policy = Policy("careless")

    @policy.on(EventName.CREATE_CONTAINER)
    def adjust(event: Event) -> Decision:
        patch = ResourcePatch(cpu_shares=512, unified={"cpu.idle": "1", "memory.high": "max"})
        return Decision(adjust=Adjustment(resources=patch), update=(
            ContainerUpdate("other", ResourcePatch(unified={"cpu.idle": "1"})),
            ContainerUpdate("third", ResourcePatch(cpu_shares=2, unified={"cpu.idle": "0"})),
        ), push=(ContainerUpdate("pushed", ResourcePatch(cpu_shares=4, unified=IDLE)),))

    create = envelope("CreateContainer", pod=pod(), container=container())
    sent = PolicyRunner(policy, facts=NodeFacts(cgroup_version=1)).send(create)
    # Pushed updates go through the bridge to UpdateContainers: the same rule.
    pushed = sent.evaluation.decision.push
    assert pushed == (ContainerUpdate("pushed", ResourcePatch(cpu_shares=4)),)
    reply = sent.json
    assert reply == {
        "adjust": {"linux": {"resources": {"cpu": {"shares": 512}}}},
        "update": [{"container_id": "third", "linux": {"resources": {"cpu": {"shares": 2}}}}],
        "warnings": [
            "unified cpu.idle, memory.high dropped (adjust): cgroup v1 node, runc refuses "
            "unified keys there",
            "unified cpu.idle dropped (other): cgroup v1 node, runc refuses unified keys there",
            "unified cpu.idle dropped (third): cgroup v1 node, runc refuses unified keys there",
            "unified cpu.idle dropped (pushed): cgroup v1 node, runc refuses unified keys there",
        ],
    }
    v2 = PolicyRunner(policy, facts=NodeFacts(cgroup_version=2)).send(create).json
    assert v2["adjust"]["linux"]["resources"]["unified"] == {"cpu.idle": "1", "memory.high": "max"}
    assert "warnings" not in v2


def test_unified_keys_a_cgroup_v2_node_lacks_are_dropped_and_logged_once_per_key(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Any policy, not only koordinator-qos: runc opens <container cgroup>/<key>, so a key whose
    # file the containers' cgroups lack (cpu.bvt_warp_ns on a stock kernel) stops the container.
    policy = Policy("anolis-minded")

    @policy.on(EventName.CREATE_CONTAINER)
    def adjust(event: Event) -> Decision:
        patch = ResourcePatch(cpu_shares=512, unified={"cpu.bvt_warp_ns": "2", "cpu.idle": "1"})
        return Decision(adjust=Adjustment(resources=patch), update=(
            ContainerUpdate("other", ResourcePatch(unified={"cpu.bvt_warp_ns": "2"})),
            ContainerUpdate("third", ResourcePatch(unified={"memory.high": "max",
                                                            "cpu.bvt_warp_ns": "-1"})),
        ), push=(ContainerUpdate("pushed", ResourcePatch(unified={"cpu.bvt_warp_ns": "0"})),))

    # The facts as the server probes them from a stock kernel's cgroup v2 tree.
    server = PolicyServer(ServerOptions(cgroup_root=cgroup_v2_root(tmp_path / "cg")), [policy])
    assert server.facts == STOCK_V2
    create = envelope("CreateContainer", pod=pod(), container=container())
    with caplog.at_level("WARNING", logger="policy_server.engine.evaluate"):
        first = evaluate_json(server.engine, "anolis-minded", create)
        again = evaluate_json(server.engine, "anolis-minded", create)
    for sent in (first, again):
        assert reply_of(sent) == {
            "adjust": {"linux": {"resources": {"cpu": {"shares": 512},
                                               "unified": {"cpu.idle": "1"}}}},
            "update": [{"container_id": "third",
                        "linux": {"resources": {"unified": {"memory.high": "max"}}}}],
        }
        assert sent.decision.push == ()  # pushed updates reach UpdateContainers: same rule
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said  # one line per policy and key, not one per request
    assert said[0].startswith("policy=anolis-minded: unified[cpu.bvt_warp_ns] dropped (adjust)")
    assert "this node's containers have no cgroup file cpu.bvt_warp_ns" in said[0]
    # The same policy on a node whose files nobody probed: nothing is known to fail.
    kept = PolicyRunner(policy).send(create).json
    assert kept["adjust"]["linux"]["resources"]["unified"] == {"cpu.bvt_warp_ns": "2",
                                                               "cpu.idle": "1"}
