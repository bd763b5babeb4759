"""The one request decoder (``engine.request.parse_request``): every request a runtime sent (and
every example) decodes to the ``Event`` that re-encodes to its body; every other body gets a 422
with the decoder's own path and message, and is one the contract's strict model refuses too."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bridge.contract import schema as contract_schema
from bridge.contract.capabilities import runtime_ref
from bridge.contract.catalogue import REQUEST_TYPES, EventName
from bridge.contract.nri_version import nri_version_of
from bridge.contract.request_body import envelope_document, event_payload
from bridge.reply_review.replay import load_cases
from bridge.simulator.scenario import SCENARIO_DIR
from policy_server.engine.request import parse_request
from policy_server.exceptions import PayloadError
from policy_server.http_edge.hot_route import evaluate_body
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.factory import synchronize_event
from tests.recordings import load_wire_log, sync_payload

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


def test_every_example_and_recorded_request_decodes_to_its_event() -> None:
    assert len(EXAMPLE_FILES) >= len(EventName) and len(WIRE_LOGS) >= 8
    events = set()
    for where, body in REQUESTS:
        event = parse_request(_raw(body))
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
            "linux_resources": _resources(3)}
    sync = {k: v for k, v in body.items() if k not in ("pod", "container", "linux_resources")}
    sync.update(event="Synchronize", pods=[pod], containers=[container])
    events = [parse_request(_raw(doc)) for doc in (body, sync)]
    assert [event.json() for event in events] == [body, sync]
    # ValidateContainerAdjustment's keys: tests/policy_server/sdk/test_contract_reach.py
    validator_only = {"event.adjust", "event.update", "event.owners.containers", "event.plugins"}
    # A field left at its default in both (each event carries its own payload keys).
    unset_in = [{where for where, value in _every_field(event, "event") if not value}
                for event in events]
    unset = sorted(unset_in[0] & unset_in[1] - validator_only)
    assert unset == []  # so a field the conversion forgot cannot hide behind its default


# --- bodies refused, bodies taken ----------------------------------------------------------------

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

# Bytes a dict cannot express, and edge cases of the decoder.
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
    "budget 2**64-1": CREATE.replace(BUDGET, b'"budget_ms":18446744073709551615'),
    "budget 2**64": CREATE.replace(BUDGET, b'"budget_ms":18446744073709551616'),
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


class _NotAnInteger:
    """A JSON number written with a fraction or exponent (``5.0``, ``1e3``): JSON Schema's
    ``integer`` admits it, the decoder does not (docs/webhooks.md, "Refused requests")."""

    def __init__(self, text: str) -> None:
        self.text = text


def _no_constant(text: str) -> Any:
    raise ValueError(f"not JSON: {text}")


def schema_takes(raw: bytes) -> bool:
    """Whether the published schema of the body's event (else of any event) takes ``raw``."""
    try:
        doc = json.loads(raw.decode(), parse_float=_NotAnInteger, parse_constant=_no_constant)
        json.dumps(doc, default=str, ensure_ascii=False).encode()  # a lone surrogate: not text
    except ValueError:  # not JSON (NaN, a byte order mark, a lone surrogate), not UTF-8
        return False
    event = doc.get("event") if isinstance(doc, dict) else None
    name = f"events/{event}.request.schema.json"
    if not isinstance(event, str) or name not in _SCHEMAS:
        name = "request.schema.json"
    return _validator(name).is_valid(doc)


_SCHEMAS = contract_schema.build()


@functools.cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(_SCHEMAS[name])


async def test_the_decoder_and_the_published_schema_agree_and_every_refusal_is_a_422() -> None:
    """Every field of three rich examples deleted, nulled, or given each JSON type: answered 200
    exactly when the published request schema (jsonschema) takes the body, else 422 with one
    decoder entry (400: a string that breaks its field's limits, a mount path that is not
    absolute: limits a schema states only in part)."""
    server = PolicyServer(ServerOptions(rules_path=RULES))
    statuses: dict[int, int] = {}
    for raw in [CREATE, *RAW_CASES.values(), *mutations()]:
        status, body = await evaluate_body(server, POLICY, raw)
        statuses[status] = statuses.get(status, 0) + 1
        if status != 400:
            assert schema_takes(raw) == (status == 200), (status, body, raw[:300])
        if status == 200:
            continue
        assert status in (400, 422), body
        [detail] = json.loads(body)["detail"]
        kinds = ("field_refused",) if status == 400 else ("value_error", "json_invalid")
        assert detail["type"] in kinds and detail["msg"], detail
        assert detail["loc"][0] == "body"
    assert statuses[200] > 100 and statuses[422] > 100, statuses
    # Only the SDK's own rules know the event: those refusals are counted as invalid.
    assert any('outcome="invalid"' in line for line in _requests_metrics(server))


@pytest.mark.parametrize(
    ("case", "loc", "kind", "msg"),
    [
        ("not JSON", ["body"], "json_invalid", "JSON is malformed"),
        ("empty", ["body"], "json_invalid", "Input data was truncated"),
        ("trailing garbage", ["body"], "json_invalid", "trailing characters"),
        ("invalid UTF-8", ["body"], "json_invalid", "can't decode byte 0xff"),
        ("byte order mark", ["body"], "json_invalid", "JSON is malformed"),
        ("an array", ["body"], "value_error", "Expected `object`, got `array`"),
        ("budget 2**64-1", ["body", "budget_ms"], "value_error",
         "Expected `int` <= 9223372036854775807"),  # msgspec bounds integers at int64
        ("budget 2**64", ["body", "budget_ms"], "value_error",
         "Expected `int` <= 9223372036854775807"),
        ("budget string", ["body", "budget_ms"], "value_error", "Expected `int`, got `str`"),
        ("budget 1e3", ["body", "budget_ms"], "value_error", "Expected `int`, got `float`"),
        ("dry_run 1", ["body", "dry_run"], "value_error", "Expected `bool`, got `int`"),
        ("api_version absent", ["body"], "value_error",
         "Object missing required field `api_version`"),
        ("container state as a number", ["body", "container", "state"], "value_error",
         "Expected `str | null`, got `int`"),
        ("synchronize: a state as a number", ["body", "containers", 1, "state"],
         "value_error", "Expected `str | null`, got `int`"),
        ("pod missing", ["body"], "value_error", "missing required field `pod`"),
        ("container missing", ["body"], "value_error", "missing required field `container`"),
        ("a bool the engine ignores as 1",
         ["body", "container", "linux", "resources", "memory", "disable_oom_killer"],
         "value_error", "Expected `bool | null`, got `int`"),
        ("an extra key", ["body"], "value_error", "Object contains unknown field `extra`"),
    ],
)
async def test_a_refused_body_gets_the_decoders_path_and_message(
        case: str, loc: list[Any], kind: str, msg: str) -> None:
    server = PolicyServer(ServerOptions(rules_path=RULES))
    status, body = await evaluate_body(server, POLICY, RAW_CASES[case])
    assert status == 422, body
    [detail] = json.loads(body)["detail"]
    assert (detail["loc"], detail["type"]) == (loc, kind) and msg in detail["msg"], detail


@pytest.mark.parametrize("case", ["duplicate key (the last wins)", "budget -0"])
async def test_bodies_the_decoder_takes(case: str) -> None:
    server = PolicyServer(ServerOptions(rules_path=RULES))
    status, _ = await evaluate_body(server, POLICY, RAW_CASES[case])
    assert status == 200


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
        ([{"id": "p", "labels": {"a": 1}}], [], "pods[0].labels...."),
        ([], [{"id": "c", "state": 2}], "containers[0].state"),
        ([], [{"id": "c", "linux": {"resources": {"cpu": {"shares": "x"}}}}],
         "containers[0].linux.resources.cpu.shares"),
        ([], [{"id": "c", "surprise": True}], "containers[0]"),
    ],
)
def test_a_bad_bridge_state_is_refused_naming_the_entry(
        pods: list[Any], containers: list[Any], field: str) -> None:
    with pytest.raises(PayloadError) as info:
        synchronize_event("reconcile", pods, containers)
    assert info.value.field == field
