"""A ``Payload.BODY`` policy: its handlers get the envelope and the body, never the typed payload
(the request path does not build it for them), on every entry point; the request is refused
exactly as for any other policy (the same 422s, the same 404, in the same order)."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest

from policy_server import Event, EventName, Payload, Policy, PolicyError
from policy_server.engine.request import parse_request
from policy_server.engine.request_event import PAYLOAD_FIELDS, names_of, without_payload
from policy_server.http_edge.hot_route import evaluate_body
from policy_server.service import PolicyServer, ServerOptions
from policy_server.testing import PolicyRunner
from tests.policy_server.engine.test_request_path import CREATE, RAW_CASES, REQUESTS, mutations
from tests.policy_server.factory import node_reader

DEFAULTS = {f.name: f.default for f in dataclasses.fields(Event) if f.name in PAYLOAD_FIELDS}


def recording(name: str, payload: Payload) -> tuple[Policy[None], list[Event]]:
    """A policy answering every event that keeps the events its handler got."""
    seen: list[Event] = []
    policy = Policy(name, payload=payload)

    @policy.on(*EventName)
    def record(event: Event) -> None:
        seen.append(event)

    return policy, seen


def _raw(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def assert_envelope_only(event: Event, body: dict[str, Any]) -> None:
    assert {name: getattr(event, name) for name in PAYLOAD_FIELDS} == DEFAULTS
    assert event.name == body["event"] and event.uid == body["uid"]
    assert event.runtime_name == body["runtime"]["name"]
    assert event.budget_ms == body.get("budget_ms") and event.dry_run == body.get("dry_run", False)
    assert event.json() == body


@pytest.mark.parametrize("beside", [[], ["node-reader"], ["koordinator-qos"]])
async def test_the_route_gives_a_body_policy_the_envelope_and_body_only(beside: list[str]) -> None:
    """Alone, beside a policy that reads the node view (the payload is then built for the
    fold, and still not handed to the body policy), beside koordinator-qos (observers that do
    not read the view)."""
    policy, seen = recording("body", Payload.BODY)
    extra = [node_reader()] if "node-reader" in beside else []
    options = ServerOptions(default_policies="koordinator-qos" in beside)
    server = PolicyServer(options, [policy, *extra])
    for where, body in REQUESTS:
        raw = _raw(body)
        status, _ = await evaluate_body(server, "body", raw)
        assert status == 200, where
        event = seen.pop()
        assert_envelope_only(event, body)
        assert event.body == raw
        assert event == parse_request(raw, payload=False)


async def test_a_typed_policy_beside_it_still_gets_the_payload() -> None:
    body_policy, _ = recording("body", Payload.BODY)
    typed_policy, seen = recording("typed", Payload.TYPED)
    server = PolicyServer(ServerOptions(default_policies=False), [body_policy, typed_policy])
    assert await evaluate_body(server, "typed", CREATE) == (200, b"{}")
    [event] = seen
    assert event == parse_request(CREATE)
    assert event.pod is not None and event.container is not None


def test_the_test_kit_gives_a_body_policy_the_same_event() -> None:
    """The kit keeps the node view for ``runner.node`` (so it builds the payload), yet the
    policy gets what the server would give it."""
    policy, seen = recording("body", Payload.BODY)
    runner = PolicyRunner(policy)
    for _, body in REQUESTS:
        runner.send(body)
        assert_envelope_only(seen.pop(), body)
    create = json.loads(CREATE)
    runner.send(create)
    assert create["pod"]["id"] in runner.node.pods  # the view was kept all the same


async def test_refusals_are_the_same_for_a_body_policy() -> None:
    """Every bad body gets the same 422 (or 400: a field's limits) whichever policy it is sent
    to, an unknown one included (a refusal before a 404, as before), and a good body to an
    unknown name a 404."""
    body_policy, _ = recording("body", Payload.BODY)
    typed_policy, _ = recording("typed", Payload.TYPED)
    server = PolicyServer(ServerOptions(default_policies=False), [body_policy, typed_policy])
    refused = 0
    for raw in [*RAW_CASES.values(), *mutations()]:
        typed = await evaluate_body(server, "typed", raw)
        assert await evaluate_body(server, "body", raw) == typed
        unknown = await evaluate_body(server, "nope", raw)
        if typed[0] in (400, 422):
            refused += 1
            assert unknown == typed
        else:
            assert typed[0] == 200
            assert unknown == (404, b'{"detail":"no policy named \'nope\' (known: body, typed)"}')
    assert refused > 100


def test_the_event_without_payload_is_the_event_built_without_it() -> None:
    """``without_payload`` and ``parse_request(..., payload=False)`` agree on every example and
    recorded request, keep the envelope and the body, and reset every payload field some
    request carries."""
    validate = next(b for _, b in REQUESTS if b["event"] == "ValidateContainerAdjustment")
    update = {"container_id": "other", "linux": {"resources": {"cpu": {"shares": 512}}}}
    carried: set[str] = set()
    for where, body in [*REQUESTS, ("with an update", {**validate, "update": [update]})]:
        raw = _raw(body)
        full, bare = parse_request(raw), parse_request(raw, payload=False)
        assert without_payload(full) == bare, where
        assert without_payload(bare) is bare
        for field in dataclasses.fields(Event):
            if field.name not in PAYLOAD_FIELDS:
                assert getattr(bare, field.name) == getattr(full, field.name), field.name
            elif getattr(full, field.name) != field.default:
                carried.add(field.name)
    assert carried == set(PAYLOAD_FIELDS)


def test_log_lines_name_the_pod_and_container_of_a_body_policys_event(
        caplog: pytest.LogCaptureFixture) -> None:
    """A handler's failure is logged with the pod and the container whether its policy reads
    the typed payload or only the body (their names are then read from the body)."""
    caplog.set_level(logging.INFO, logger="policy_server.engine.evaluate")
    lines = {}
    for payload in Payload:
        policy = Policy(f"failing-{payload.name.lower()}", payload=payload)

        @policy.on(*EventName)
        def refuse(event: Event) -> None:
            raise PolicyError("no")

        runner = PolicyRunner(policy)
        for _, body in REQUESTS:
            caplog.clear()
            runner.send(body)
            [record] = [r for r in caplog.records if "handler=refuse" in r.getMessage()]
            lines[payload, body["uid"], body["event"]] = record.getMessage().split(": no ", 1)[1]
    named = 0
    for (_, uid, name), line in lines.items():
        assert line == lines[Payload.TYPED, uid, name]
        named += "pod=" in line
        if name in ("CreateContainer", "StartContainer"):
            assert "container=" in line and "pod=" in line
    assert named >= 10
    pod, container = names_of(CREATE)
    created = json.loads(CREATE)
    assert pod == f"{created['pod']['namespace']}/{created['pod']['name']}"
    assert container == created["container"]["name"]
    assert names_of(b"not json") == (None, None)
    assert names_of(b'{"pod": null}') == (None, None)
