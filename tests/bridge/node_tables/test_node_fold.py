"""One pod/container fold (bridge.node_tables.fold): the bridge's state cache (protobuf), the
policy server's NodeView (SDK dataclasses, from the envelope the bridge sends) and the simulated
runtime's own store end every lifecycle in the same state, and RemovePodSandbox drops the
containers still recorded for the pod in all three. The runtime, the source of truth, differs
where an observer must guess: it forgets no pod it was seeded with."""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf.message import Message

from bridge.contract.capabilities import runtime_ref
from bridge.contract.catalogue import EVENTS_BY_RPC, EventName
from bridge.contract.codec import request_subjects
from bridge.contract.request_body import PayloadBuilder, encode, envelope
from bridge.node_tables.fold import NodeTables
from bridge.nri.cache import StateCache
from bridge.proto.nri import api_pb2 as api
from bridge.simulator.state import RuntimeState
from policy_server.engine.request import parse_request
from policy_server.sdk.node_view import NodeState

P1 = api.PodSandbox(id="p1", name="web", namespace="default", uid="u1")
P2 = api.PodSandbox(id="p2", name="db", namespace="default", uid="u2")


def _c(cid: str, pod: str, state: api.ContainerState = api.CONTAINER_UNKNOWN) -> api.Container:
    return api.Container(id=cid, pod_sandbox_id=pod, name=cid, state=state)


def lifecycle() -> Iterator[tuple[str, Message]]:
    yield "Synchronize", api.SynchronizeRequest(
        pods=[P1, P2], containers=[_c("c1", "p1", api.CONTAINER_RUNNING),
                                   _c("c2", "p2", api.CONTAINER_RUNNING)])
    yield "RunPodSandbox", api.RunPodSandboxRequest(pod=api.PodSandbox(id="p3", name="new"))
    yield "CreateContainer", api.CreateContainerRequest(pod=P1, container=_c("c3", "p1"))
    yield "StartContainer", api.StartContainerRequest(pod=P1, container=_c("c3", "p1"))
    yield "CreateContainer", api.CreateContainerRequest(pod=P2, container=_c("c4", "p2"))
    yield "StopContainer", api.StopContainerRequest(
        pod=P2, container=_c("c2", "p2", api.CONTAINER_RUNNING))
    yield "RemoveContainer", api.RemoveContainerRequest(
        pod=P2, container=_c("c2", "p2", api.CONTAINER_STOPPED))
    # p1's containers were never reported removed (a RemoveContainer the bridge did not see).
    yield "StopPodSandbox", api.StopPodSandboxRequest(pod=P1)
    yield "RemovePodSandbox", api.RemovePodSandboxRequest(pod=P1)


def _states(containers: dict[str, api.Container]) -> dict[str, str]:
    return {cid: api.ContainerState.Name(c.state) for cid, c in containers.items()}


def _fold_all(events: Iterator[tuple[str, Message]],
              ) -> tuple[StateCache, NodeState, RuntimeState]:
    cache, node, runtime_state = StateCache(), NodeState(), RuntimeState()
    builder = PayloadBuilder()
    runtime = encode(runtime_ref("containerd", "2.1.9", (0, 12, 0)))
    for name, req in events:
        if isinstance(req, api.SynchronizeRequest):
            cache.reset(list(req.pods), list(req.containers))
            runtime_state.seed(req.pods, req.containers)  # what the runtime had before
            payload = builder.sync(req.pods, req.containers)
        else:
            cache.observe_request(EVENTS_BY_RPC[name], req)
            runtime_state.observe(EVENTS_BY_RPC[name], *request_subjects(req))
            payload = builder.event(name, req)
        node.apply(parse_request(envelope(name, "u", runtime, 100, False, payload)))
        # After every event, both sides hold the same pods and containers, in the same states.
        assert sorted(cache.pods) == sorted(node.pods), name
        assert _states(cache.containers) == {cid: c.state for cid, c in node.containers.items()}, \
            name
    return cache, node, runtime_state


def _fold_both(events: Iterator[tuple[str, Message]]) -> tuple[StateCache, NodeState]:
    cache, node, _ = _fold_all(events)
    return cache, node


def test_the_bridge_cache_and_the_node_view_fold_alike() -> None:
    cache, node = _fold_both(lifecycle())
    assert sorted(cache.pods) == ["p2", "p3"]
    assert {cid: c.state for cid, c in node.containers.items()} == {"c4": "CONTAINER_CREATED"}
    assert not cache.knows_container("c1") and not cache.knows_container("c3")


def test_the_simulated_runtime_folds_like_the_bridge() -> None:
    cache, _, runtime_state = _fold_all(lifecycle())
    assert sorted(runtime_state.pods) == sorted(cache.pods) == ["p2", "p3"]
    assert _states(runtime_state.containers) == _states(cache.containers) == {
        "c4": "CONTAINER_CREATED"}


def test_the_simulated_runtime_is_the_truth_not_an_observer() -> None:
    """It forgets no seeded pod, adds no pod an event merely names, and keeps the container it
    stored (with its updates) when a later event carries an older copy."""
    _, _, runtime_state = _fold_all(after_a_runtime_restart())
    assert sorted(runtime_state.pods) == ["p1", "p2", "p3"]  # the cache and the view: p2, p3
    runtime_state.observe(EVENTS_BY_RPC["CreateContainer"], api.PodSandbox(id="p7"), _c("c7", "p7"))
    assert "p7" not in runtime_state.pods and "c7" in runtime_state.containers
    update = api.ContainerUpdate(container_id="c7")
    update.linux.resources.cpu.shares.value = 512
    assert runtime_state.apply_update(update)
    runtime_state.observe(EVENTS_BY_RPC["StartContainer"], None, _c("c7", "p7"))
    started = runtime_state.containers["c7"]
    assert started.state == api.CONTAINER_RUNNING
    assert started.linux.resources.cpu.shares.value == 512


def test_the_tables_are_bounded_and_changed_in_place() -> None:
    tables: NodeTables[api.PodSandbox, api.Container] = NodeTables(
        "test", lambda c: str(c.state), lambda c, s: c, max_objects=2)
    pods = tables.pods
    tables.reset([api.PodSandbox(id=f"p{i}") for i in range(5)], [])
    assert tables.pods is pods and sorted(pods) == ["p0", "p1"]
    tables.fold(EventName.RUN_POD_SANDBOX, api.PodSandbox(id="p9"), None)
    assert sorted(pods) == ["p0", "p1"]  # full: a new pod is not tracked
    tables.fold(EventName.RUN_POD_SANDBOX, api.PodSandbox(id="p0", name="again"), None)
    assert pods["p0"].name == "again"  # a known one is still updated


def after_a_runtime_restart() -> Iterator[tuple[str, Message]]:
    """containerd 2.1.9 after a restart: the re-registration's Synchronize lists the pods, and
    removing one sends its containers' events but no StopPodSandbox or RemovePodSandbox."""
    yield "Synchronize", api.SynchronizeRequest(
        pods=[P1, P2], containers=[_c("c1", "p1", api.CONTAINER_RUNNING),
                                   _c("c2", "p2", api.CONTAINER_RUNNING),
                                   _c("c3", "p2", api.CONTAINER_RUNNING)])
    p3 = api.PodSandbox(id="p3", name="new")
    yield "RunPodSandbox", api.RunPodSandboxRequest(pod=p3)
    yield "CreateContainer", api.CreateContainerRequest(pod=p3, container=_c("c5", "p3"))
    yield "RemoveContainer", api.RemoveContainerRequest(pod=p3, container=_c("c5", "p3"))
    yield "StopContainer", api.StopContainerRequest(
        pod=P1, container=_c("c1", "p1", api.CONTAINER_RUNNING))
    yield "RemoveContainer", api.RemoveContainerRequest(
        pod=P1, container=_c("c1", "p1", api.CONTAINER_STOPPED))
    yield "RemoveContainer", api.RemoveContainerRequest(
        pod=P2, container=_c("c2", "p2", api.CONTAINER_STOPPED))


def test_a_pod_known_from_a_synchronize_leaves_with_its_last_container() -> None:
    cache, node = _fold_both(after_a_runtime_restart())
    # p1: its only container removed, no pod event to come; p2 keeps c3; p3 was seen being
    # made, so its own StopPodSandbox / RemovePodSandbox will remove it.
    assert sorted(cache.pods) == ["p2", "p3"]
    assert sorted(node.pods) == ["p2", "p3"]
    # A later event for a forgotten pod adds it back (a container created in it after all).
    cache, node = _fold_both(iter([
        *after_a_runtime_restart(),
        ("CreateContainer", api.CreateContainerRequest(pod=P1, container=_c("c9", "p1"))),
        ("RemoveContainer", api.RemoveContainerRequest(pod=P1, container=_c("c9", "p1"))),
        ("CreateContainer", api.CreateContainerRequest(pod=P1, container=_c("c8", "p1"))),
    ]))
    assert sorted(cache.pods) == ["p1", "p2", "p3"]
    assert sorted(node.containers) == ["c3", "c8"]
