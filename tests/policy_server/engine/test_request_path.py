"""The one request path (``engine.request.parse_request``): the ``Event`` it builds is exactly the
one the server's old parser gave, and every answer (errors and metrics included) is exactly what
the route answered before the path was unified: orjson, the contract in lax mode, then the old
parser (``reference_parse``, kept in the tests as the oracle)."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from bridge.contract import WebhookRequest
from bridge.contract.capabilities import runtime_ref
from bridge.contract.catalogue import REQUEST_TYPES, EventName
from bridge.contract.nri_version import nri_version_of
from bridge.contract.request_body import envelope_document, event_payload, sync_payload
from bridge.replies.replay import load_cases
from bridge.simulator.recording import load_wire_log
from bridge.simulator.scenario import SCENARIO_DIR
from policy_server.engine.request import field_loc, parse_request, synchronize_event
from policy_server.exceptions import PayloadError, RequestError, UnknownPolicyError
from policy_server.request_service import PolicyServer, ServerOptions
from policy_server.sdk.model import Container, Event, Memory, Resources
from policy_server.sdk.validation import NO_OWNERS
from policy_server.server import hot_route
from policy_server.server.hot_route import evaluate_body
from tests.policy_server.reference_parse import parse_event

ROOT = Path(__file__).parents[3]
RULES = ROOT / "examples" / "koordinator-rules.yaml"
CONTRACT_EXAMPLES = ROOT / "schemas" / "webhook" / "examples"
EXAMPLE_FILES = sorted(CONTRACT_EXAMPLES.glob("*.request.json")) + sorted(
    (ROOT / "examples" / "requests").glob("*.json"))
WIRE_LOGS = sorted(SCENARIO_DIR.glob("*-wire*.jsonl"))
BRIDGE_RECORDING = ROOT / "examples" / "python-policy" / "recording.jsonl"
POLICY = "koordinator-qos"


def wire_log_bodies(path: Path) -> Iterator[dict[str, Any]]:
    """The webhook body the bridge builds for every event a real runtime sent (simulator logs)."""
    lines = load_wire_log(path)
    configure: Any = lines[0].request
    assert lines[0].rpc == "Configure"
    nri = nri_version_of(configure.runtime_name, configure.runtime_version, configure.NRI_version)
    runtime = runtime_ref(configure.runtime_name, configure.runtime_version, nri)
    for number, line in enumerate(lines):
        req: Any = line.request
        if line.rpc == "Synchronize":
            name, payload = "Synchronize", sync_payload(list(req.pods), list(req.containers))
        elif line.event is None:
            continue  # Configure
        else:
            name = line.event.rpc_name
            if line.rpc == "StateChange":  # carried as StateChange: the event's own request
                typed: Any = REQUEST_TYPES[line.event]()
                for key in ("pod", "container"):
                    if key in typed.DESCRIPTOR.fields_by_name and req.HasField(key):
                        getattr(typed, key).CopyFrom(getattr(req, key))
                req = typed
            payload = event_payload(name, req)
        yield envelope_document(name, f"{path.stem}-{number}", runtime, 1900, False, payload)


def every_request() -> list[tuple[str, dict[str, Any]]]:
    out = [(p.name, json.loads(p.read_text())) for p in EXAMPLE_FILES]
    for path in WIRE_LOGS:
        out += [(f"{path.name}:{b['uid']}", b) for b in wire_log_bodies(path)]
    out += [(case.where, case.request) for case in load_cases([BRIDGE_RECORDING], None)]
    return out


REQUESTS = every_request()


def _raw(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def strict_event(raw: bytes) -> Event | None:
    """The event if the body passes the strict parse, else None (the body is only explained)."""
    try:
        WebhookRequest.model_validate_json(raw, strict=True)
    except ValidationError:
        return None
    try:
        return parse_request(raw)
    except RequestError:
        return None


async def reference_answer(server: PolicyServer, name: str, raw: bytes) -> tuple[int, bytes]:
    """What the route answered before its request path was unified (orjson, the lax contract
    model, the old parser), for the same policy server."""
    def detail(status: int, value: Any) -> tuple[int, bytes]:
        return status, orjson.dumps({"detail": value}, default=str)

    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return detail(422, [{"type": "json_invalid", "loc": ["body", exc.pos],
                             "msg": "JSON decode error", "input": {},
                             "ctx": {"error": exc.msg}}])
    try:
        WebhookRequest.model_validate(data)
    except ValidationError as exc:
        return detail(422, [{**e, "loc": ["body", *e["loc"]]}
                            for e in exc.errors(include_url=False)])
    try:
        event = parse_event(data)
    except PayloadError as exc:
        server.metrics.requests.labels(name, str(data.get("event")), "invalid").inc()
        return detail(422, [{"loc": field_loc(exc.field), "msg": exc.message,
                             "type": "value_error"}])
    try:
        evaluation = await server.handle(name, event)
    except UnknownPolicyError:
        return hot_route._unknown(server, name)
    return hot_route._reply(name, evaluation)


def _resources_as_the_oracle_reads(r: Resources | None) -> Resources | None:
    if r is None:
        return None
    cpu = dataclasses.replace(r.cpu, realtime_runtime=None, realtime_period=None)
    return dataclasses.replace(r, cpu=cpu, memory=Memory(r.memory.limit), blockio_class=None,
                               pids_limit=None, hugepage_limits={})


def _container_as_the_oracle_reads(c: Container) -> Container:
    return dataclasses.replace(
        c, resources=_resources_as_the_oracle_reads(c.resources), user=None, image=None,
        exit_code=None, status_reason="", status_message="", cdi_devices=(), sysctl={},
        rlimits=())


def as_the_oracle_reads(event: Event) -> Event:
    """``event`` with only the fields the old parser read (issue 33 typed more of the request;
    tests/policy_server/sdk/test_contract_reach.py checks those)."""
    return dataclasses.replace(
        event,
        container=_container_as_the_oracle_reads(event.container) if event.container else None,
        containers=tuple(map(_container_as_the_oracle_reads, event.containers)),
        linux_resources=_resources_as_the_oracle_reads(event.linux_resources),
        adjust=None, update=(), owners=NO_OWNERS, plugins=(), body=b"")


def test_every_example_and_recorded_request_converts_to_the_old_parsers_event() -> None:
    assert len(EXAMPLE_FILES) >= len(EventName) and len(WIRE_LOGS) >= 8
    events = set()
    for where, body in REQUESTS:
        event = strict_event(_raw(body))
        assert event is not None, where  # every real request takes the fast path
        assert as_the_oracle_reads(event) == parse_event(body), where
        assert event.json() == body, where
        events.add(event.name)
    assert events == set(EventName)  # every event, ValidateContainerAdjustment with owners too


def _resources(n: int) -> dict[str, Any]:
    return {"cpu": {"shares": n, "quota": n + 1, "period": n + 2, "cpus": f"0-{n}", "mems": "0",
                    "realtime_runtime": n + 3, "realtime_period": n + 4},
            "memory": {"limit": n << 20, "reservation": n << 19, "swap": n << 21,
                       "swappiness": n},
            "unified": {"memory.high": str(n)}, "rdt_class": f"class-{n}",
            "blockio_class": f"io-{n}", "pids": {"limit": n * 100},
            "hugepage_limits": [{"page_size": "2MB", "limit": n << 21}]}


def _every_field(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    """(path, value) of every field of the engine's dataclasses, nested ones walked too."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _every_field(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, tuple) and value and hasattr(value[0], "_fields"):  # mounts
        yield from ((f"{where}[0].{k}", v) for k, v in value[0]._asdict().items())
    else:
        yield where, value


def test_every_field_the_engine_reads_is_carried_over() -> None:
    # The examples leave some fields empty (no pod IPs, no rdt class): here every one is set.
    pod = {"id": "p1", "name": "web", "uid": "u1", "namespace": "ns", "labels": {"a": "1"},
           "annotations": {"b": "2"}, "runtime_handler": "kata", "ips": ["10.0.0.7"],
           "linux": {"cgroup_parent": "/kubepods/p1", "cgroups_path": "/kubepods/p1/s"}}
    container = {"id": "c1", "pod_sandbox_id": "p1", "name": "app",
                 "state": "CONTAINER_RUNNING", "labels": {"c": "3"}, "annotations": {"d": "4"},
                 "args": ["/bin/app", "-v"], "env": ["A=1"], "pid": 4321,
                 "mounts": [{"destination": "/data", "type": "bind", "source": "/srv",
                             "options": ["rbind", "ro"]}],
                 "linux": {"resources": _resources(2), "oom_score_adj": -998,
                           "sysctl": {"net.core.somaxconn": "1024"}},
                 "user": {"uid": 1000, "gid": 1000, "additional_gids": [5]},
                 "image": {"name": "busybox:1.0", "digest": "sha256:aa",
                           "config_digest": "sha256:bb"},
                 "exit_code": 137, "status_reason": "OOMKilled", "status_message": "oom",
                 "CDI_devices": [{"name": "vendor.com/gpu=0"}],
                 "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 1024}]}
    body = {"api_version": "nri-webhook-bridge/v1", "uid": "u-42", "event": "UpdateContainer",
            "runtime": {"name": "containerd", "version": "2.3.4", "nri_version": "v0.12.0",
                        "capabilities": ["env"]},
            "budget_ms": 1500, "dry_run": True, "pod": pod, "container": container,
            "linux_resources": _resources(3), "pods": [pod], "containers": [container]}
    event = strict_event(_raw(body))
    assert event is not None and as_the_oracle_reads(event) == parse_event(body)
    # ValidateContainerAdjustment's keys: tests/policy_server/sdk/test_contract_reach.py
    validator_only = {"event.adjust", "event.update", "event.owners.containers", "event.plugins"}
    unset = [where for where, value in _every_field(event, "event")
             if not value and where not in validator_only]
    assert unset == []  # so a field the conversion forgot cannot hide behind its default


# --- the route answers exactly as the checked path does -----------------------------------------

DELETE = object()  # a change that removes the key
_REPLACEMENTS: tuple[Any, ...] = (DELETE, None, "5", 5, 5.0, True, [], {})


def json_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value inside a JSON document (a list's first item only)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from json_paths(item, (*path, key))
    elif isinstance(value, list) and value:
        yield (*path, 0)
        yield from json_paths(value[0], (*path, 0))


def with_change(body: dict[str, Any], path: tuple[Any, ...], new: Any) -> dict[str, Any]:
    """A copy of ``body`` with ``new`` at ``path`` (``DELETE``: without the key)."""
    out = copy.deepcopy(body)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    if new is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return out


def mutations() -> list[bytes]:
    """Every field of three rich examples deleted, nulled, or given each JSON type."""
    bodies = [json.loads((CONTRACT_EXAMPLES / f"{name}.request.json").read_text())
              for name in ("CreateContainer", "Synchronize", "ValidateContainerAdjustment")]
    return [_raw(with_change(body, path, new))
            for body in bodies for path in json_paths(body) for new in _REPLACEMENTS]


def _create(**changes: Any) -> dict[str, Any]:
    path = CONTRACT_EXAMPLES / "CreateContainer.request.json"
    body: dict[str, Any] = json.loads(path.read_text())
    body.update(changes)
    return body


CREATE = _raw(_create())
BUDGET = b'"budget_ms":' + str(_create()["budget_ms"]).encode()
UID = b'"uid":' + json.dumps(_create()["uid"]).encode()
assert BUDGET in CREATE and UID in CREATE
_SYNC = json.loads((CONTRACT_EXAMPLES / "Synchronize.request.json").read_text())

# Bytes a dict cannot express, and the cases the fast path hands back on purpose.
RAW_CASES: dict[str, bytes] = {
    "not JSON": b"{nope",
    "empty": b"",
    "cut short": CREATE[:-40],
    "trailing garbage": CREATE + b"x",
    "byte order mark": b"\xef\xbb\xbf" + CREATE,
    "invalid UTF-8": CREATE.replace(UID, b'"uid":"a\xffb"'),
    "lone surrogate": CREATE.replace(UID, b'"uid":"a\\ud800b"'),
    "an array": b"[]",
    "null": b"null",
    "duplicate key (the last wins)": CREATE.replace(UID, UID + b',"uid":"second"'),
    "budget 2**64-1 (orjson: an int)": CREATE.replace(BUDGET, b'"budget_ms":18446744073709551615'),
    "budget 2**64 (orjson: a float)": CREATE.replace(BUDGET, b'"budget_ms":18446744073709551616'),
    "budget 10**30": CREATE.replace(BUDGET, b'"budget_ms":' + b"1" + b"0" * 30),
    "budget 5000 digits": CREATE.replace(BUDGET, b'"budget_ms":' + b"7" * 5000),
    "budget -0": CREATE.replace(BUDGET, b'"budget_ms":-0'),
    "budget 5.0": CREATE.replace(BUDGET, b'"budget_ms":5.0'),
    "budget 1e3": CREATE.replace(BUDGET, b'"budget_ms":1e3'),
    "budget NaN": CREATE.replace(BUDGET, b'"budget_ms":NaN'),
    "budget string": _raw(_create(budget_ms="5")),
    "dry_run 1": _raw(_create(dry_run=1)),
    "api_version absent": _raw({k: v for k, v in _create().items() if k != "api_version"}),
    "container state as a number": _raw(_create(container={**_create()["container"],
                                                           "state": 2})),
    "synchronize: a state as a number": _raw({**_SYNC, "containers": [
        *_SYNC["containers"], {**_SYNC["containers"][0], "state": 3}]}),
    "pod missing": _raw({k: v for k, v in _create().items() if k != "pod"}),
    "container missing": _raw({k: v for k, v in _create().items() if k != "container"}),
    "a bool the engine ignores as 1": _raw(_create(container={
        **_create()["container"], "linux": {"resources": {"memory": {"disable_oom_killer": 1}}}})),
    "an extra key": _raw(_create(extra=1)),
    # Several faults: the first in the old parser's reading order is named.
    "dry_run 1, api_version absent": _raw({k: v for k, v in _create(dry_run=1).items()
                                           if k != "api_version"}),
    "budget string, dry_run 1": _raw(_create(budget_ms="5", dry_run=1)),
    "state a number, container missing": _raw({**{k: v for k, v in _SYNC.items()},
                                               "event": "CreateContainer",
                                               "containers": [{**_SYNC["containers"][0],
                                                               "state": 3}]}),
    "a capability a number, dry_run 1": _raw(_create(dry_run=1, runtime={
        **_create()["runtime"], "capabilities": ["env", 1]})),
}


def _requests_metrics(server: PolicyServer) -> list[str]:
    return [line for line in server.metrics.render().decode().splitlines()
            if line.startswith("policy_requests_total")]


async def test_every_answer_is_the_one_before() -> None:
    fast_server = PolicyServer(ServerOptions(rules_path=RULES))
    checked_server = PolicyServer(ServerOptions(rules_path=RULES))
    bodies = [CREATE, *RAW_CASES.values(), *mutations()]
    routes = {"fast": 0, "checked": 0}
    statuses: set[int] = set()
    for raw in bodies:
        for policy in (POLICY, "no-such-policy"):
            answer = await evaluate_body(fast_server, policy, raw)
            assert answer == await reference_answer(checked_server, policy, raw), raw[:300]
            statuses.add(answer[0])
        routes["fast" if strict_event(raw) is not None else "checked"] += 1
    # Bodies that pass the strict parse and bodies only explained, with every kind of answer;
    # the counters agree too.
    assert routes["fast"] > 100 and routes["checked"] > 100, routes
    assert statuses >= {200, 404, 422}
    assert _requests_metrics(fast_server) == _requests_metrics(checked_server)


@pytest.mark.parametrize(
    ("case", "status", "loc", "error"),
    [
        ("not JSON", 422, ["body", 1], "json_invalid"),
        ("budget 2**64 (orjson: a float)", 422, ["body", "budget_ms"], "int_parsing_size"),
        ("budget string", 422, ["body", "budget_ms"], "value_error"),
        ("api_version absent", 422, ["body", "api_version"], "value_error"),
        ("container state as a number", 422, ["body", "container", "state"], "value_error"),
        ("synchronize: a state as a number", 422, ["body", "containers", 1, "state"],
         "value_error"),
        ("pod missing", 422, ["body", "pod"], "value_error"),
        ("container missing", 422, ["body", "container"], "value_error"),
        ("budget 1e3", 422, ["body", "budget_ms"], "value_error"),
        ("an extra key", 422, ["body", "extra"], "extra_forbidden"),
        ("a bool the engine ignores as 1", 200, None, None),  # lax accepts it, as it always did
        ("budget 2**64-1 (orjson: an int)", 200, None, None),
        ("duplicate key (the last wins)", 200, None, None),
    ],
)
async def test_what_the_fast_path_hands_back_gets_the_same_answer_as_before(
        case: str, status: int, loc: list[Any] | None, error: str | None) -> None:
    raw = RAW_CASES[case]
    server = PolicyServer(ServerOptions(rules_path=RULES))
    code, body = await evaluate_body(server, POLICY, raw)
    assert code == status, body
    if loc is not None:
        [detail] = json.loads(body)["detail"]
        assert (detail["loc"], detail["type"]) == (loc, error)
    fast = strict_event(raw)
    if case.startswith(("budget 2**64-1", "duplicate")):
        assert fast is not None and fast.uid == json.loads(raw)["uid"]
    else:
        assert fast is None  # refused by the strict parse: explained (or taken) by lax mode


# --- the Synchronize the server builds itself (resync, reconciler) ------------------------------


def test_synchronize_event_is_the_request_paths_for_the_same_state() -> None:
    body = json.loads((CONTRACT_EXAMPLES / "Synchronize.request.json").read_text())
    event = synchronize_event("resync", body["pods"], body["containers"])
    sent = parse_request(_raw(body))
    assert (event.pods, event.containers) == (sent.pods, sent.containers)
    assert event.name is EventName.SYNCHRONIZE and event.uid.startswith("resync-")
    assert (event.runtime_name, event.runtime_version, event.budget_ms) == (
        "nri-policy-server", "resync", 0)


@pytest.mark.parametrize(
    ("pods", "containers", "field"),
    [
        ([{"id": "p", "labels": {"a": 1}}], [], "pods[0].labels.a"),
        ([], [{"id": "c", "state": 2}], "containers[0].state"),
        ([], [{"id": "c", "linux": {"resources": {"cpu": {"shares": "x"}}}}],
         "containers[0].linux.resources.cpu.shares"),
        ([], [{"id": "c", "surprise": True}], "containers[0].surprise"),
    ],
)
def test_a_bad_bridge_state_is_refused_naming_the_entry(
        pods: list[Any], containers: list[Any], field: str) -> None:
    with pytest.raises(PayloadError) as info:
        synchronize_event("reconcile", pods, containers)
    assert info.value.field == field
