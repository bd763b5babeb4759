"""The node view is folded only when some registered policy reads it: every request, whichever
policy it is for, once a handler or observer anywhere takes ``node``; none otherwise."""

from __future__ import annotations

import json

from policy_server import Event, EventName, NodeView, Payload, Policy
from policy_server.engine.evaluate import Engine
from policy_server.http_edge.hot_route import evaluate_body
from policy_server.sdk.registry import Registry
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.engine.test_request_path import CREATE
from tests.policy_server.factory import container, envelope, evaluate_json, node_reader, pod

POD_ID = json.loads(CREATE)["pod"]["id"]
CONTAINER_ID = json.loads(CREATE)["container"]["id"]


def plain(name: str, payload: Payload = Payload.TYPED) -> Policy[None]:
    """Handlers and an observer that do not take the node view."""
    policy = Policy(name, payload=payload)

    @policy.observe(*EventName)
    def count(event: Event) -> None:
        return None

    @policy.on(*EventName)
    def answer(event: Event) -> None:
        return None

    return policy


def engine_of(*policies: Policy[None]) -> Engine:
    registry = Registry()
    for policy in policies:
        registry.add(policy)
    return Engine(registry)


def test_nothing_is_folded_when_no_policy_reads_the_view() -> None:
    engine = engine_of(plain("typed"), plain("body", Payload.BODY))
    assert not engine.folds
    sync = envelope("Synchronize", pods=[pod()], containers=[container()])
    evaluate_json(engine, "typed", sync)
    evaluate_json(engine, "body", envelope("CreateContainer", pod=pod(), container=container()))
    assert not engine.node.pods and not engine.node.containers and not engine.node.synced
    assert engine.evaluations == 2  # what the resync's check counts instead


def test_every_request_is_folded_once_a_reader_is_registered() -> None:
    engine = engine_of(plain("typed"), plain("body", Payload.BODY), node_reader())
    assert engine.folds
    evaluate_json(engine, "body", envelope("Synchronize", pods=[pod()], containers=[]))
    evaluate_json(engine, "typed", envelope("CreateContainer", pod=pod(), container=container()))
    assert engine.node.synced
    assert set(engine.node.pods) == {pod()["id"]}
    assert set(engine.node.containers) == {container()["id"]}


async def test_a_request_to_a_body_policy_is_folded_for_a_reader_on_the_same_server() -> None:
    """The payload a body policy does not read is built for the fold all the same: the reader,
    asked about a second container, sees the first one, which only the body policy's request
    reported."""
    saw: list[tuple[set[str], set[str]]] = []
    reader = Policy("reader")

    @reader.on(EventName.CREATE_CONTAINER)
    def look(event: Event, *, node: NodeView) -> None:
        saw.append((set(node.pods), set(node.containers)))

    server = PolicyServer(
        ServerOptions(default_policies=False), [plain("body", Payload.BODY), reader]
    )
    assert await evaluate_body(server, "body", CREATE) == (200, b"{}")
    second = json.loads(CREATE)
    second["container"]["id"] = "second"
    status, _ = await evaluate_body(server, "reader", json.dumps(second).encode())
    assert status == 200
    assert saw == [({POD_ID}, {CONTAINER_ID, "second"})]
