"""The contract's msgspec Structs (``bridge.contract.request_structs``) take a subset of what the
strict ``WebhookRequest`` takes, with the same values: checked on every recorded request and on
thousands of deterministic mutations of them, and on the JSON corners where two parsers can
differ."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

import msgspec
import orjson
import pytest
from google.protobuf.descriptor import FieldDescriptor
from pydantic import ValidationError

from bridge.contract import WebhookRequest, request_structs
from bridge.contract.catalogue import API_VERSION
from bridge.contract.convert import is_wrapper
from bridge.proto.nri import api_pb2
from policy_server.engine import request as request_path
from policy_server.engine import request_event
from policy_server.engine.request import parse_request, synchronize_event
from policy_server.exceptions import RequestError
from policy_server.sdk.model import Event
from tests.policy_server.engine.test_request_path import (
    DELETE,
    REQUESTS,
    json_paths,
    with_change,
)

# Values a mutation puts somewhere: wrong JSON types, integer edges of every NRI width, enum
# names that do not exist, strings a lax parser would coerce.
ODD_VALUES: list[Any] = [
    None, "", "5", "true", 5, 0, -1, 1.5, 5.0, True, False, [], {}, {"x": 1}, ["a"], [1],
    2**31 - 1, 2**31, -(2**31) - 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, -(2**63),
    "CONTAINER_RUNNING", "CONTAINER_FOO", "NAMESPACE_UNKNOWN", "\u0000", "é",
]
MUTATIONS_PER_BODY = 40
ENVELOPE: dict[str, Any] = {
    "api_version": API_VERSION,
    "uid": "u1",
    "event": "Synchronize",
    "runtime": {"name": "containerd", "version": "2.1.9"},
    "budget_ms": 1500,
}
SEED = 20261127


def model_of(raw: bytes) -> Any:
    try:
        return WebhookRequest.model_validate_json(raw, strict=True)
    except ValidationError:
        return None


def event_of(request: Any) -> Event:
    return request_event.event_of(request, b"")


def assert_subset(raw: bytes, where: str) -> bool:
    """If the Structs take ``raw``, the model takes it with the same Event; True if they took
    it."""
    clean = request_structs.decode(raw)
    if clean is None:
        return False
    model = model_of(raw)
    assert model is not None, f"{where}: the Structs took a body the contract refuses: {raw!r}"
    if clean.api_version is request_structs.ABSENT:  # the request path refuses it (the model
        assert "api_version" not in model.model_fields_set, where  # fills in its default)
    else:  # the request decoder's Struct (ValidateContainerAdjustment's keys added)
        full = msgspec.json.decode(raw, type=request_path.WebhookRequest)
        assert event_of(full) == event_of(model), where
    return True


def mutated(doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``doc`` with one key deleted, one odd value put in, or an unknown key added."""
    path = rng.choice(list(json_paths(doc)))
    action = rng.randrange(4)
    if action == 0 and isinstance(path[-1], str):
        return with_change(doc, path, DELETE)
    if action == 1 and isinstance(path[-1], str):
        key = rng.choice(["zzz", "Pid", "id ", "labels"])
        return with_change(doc, (*path[:-1], key), rng.choice(ODD_VALUES))
    return with_change(doc, path, rng.choice(ODD_VALUES))


def test_the_structs_take_the_recorded_requests_with_the_same_event() -> None:
    taken = 0
    for where, doc in REQUESTS:
        raw = orjson.dumps(doc)
        took = assert_subset(raw, where)
        # Only ValidateContainerAdjustment's keys are outside the Structs' envelope.
        expected = not {"adjust", "update", "owners", "plugins"} & set(doc)
        assert took == expected, f"{where}: the Structs {'took' if took else 'refused'} it"
        taken += took
    assert taken > 100  # the fast path is the common path


def test_mutated_requests_are_taken_only_if_the_contract_takes_them() -> None:
    rng = random.Random(SEED)
    taken = refused = 0
    for where, doc in REQUESTS:
        for n in range(MUTATIONS_PER_BODY):
            raw = orjson.dumps(mutated(doc, rng))
            if assert_subset(raw, f"{where} mutation {n}"):
                taken += 1
            else:
                refused += 1
    # Both sides of the subset are exercised.
    assert taken > 1000 and refused > 1000


SYNC = copy.deepcopy(
    next(doc for _, doc in REQUESTS if doc["event"] == "Synchronize" and doc.get("containers"))
)
SYNC.update(uid="u1", budget_ms=1900, dry_run=False)
GOOD = orjson.dumps(SYNC).decode()
assert '"uid":"u1"' in GOOD and '"budget_ms":1900' in GOOD and '"dry_run":false' in GOOD


def with_first(key: str, value: str) -> str:
    """``GOOD`` with the first ``"key":`` given ``value`` in front of it (a duplicate key)."""
    return GOOD.replace(f'"{key}":', f'"{key}":{value},"{key}":', 1)


@pytest.mark.parametrize(
    ("text", "structs_take"),
    [
        (GOOD, True),
        (GOOD + " \n\t", True),
        (GOOD.replace('"uid"', '"\\u0075id"', 1), True),  # an escaped key is the same key
        (with_first("uid", '"first"'), True),  # both read the last of a duplicated key
        (with_first("uid", "5"), False),  # the model reads only the last: it takes this one
        (GOOD + " x", False),
        ("\ufeff" + GOOD, False),
        (GOOD.replace('"uid":"u1"', '"uid":"\\ud800"', 1), False),
        (GOOD.replace('"budget_ms":1900', '"budget_ms":NaN', 1), False),
        (GOOD.replace('"budget_ms":1900', '"budget_ms":1.9e3', 1), False),
        (GOOD.replace('"budget_ms":1900', '"budget_ms":01900', 1), False),
        (GOOD.replace('"budget_ms":1900', f'"budget_ms":{2**63}', 1), False),
        (GOOD.replace('"budget_ms":1900', f'"budget_ms":{2**64}', 1), False),
        (GOOD.replace('"dry_run":false', '"dry_run":0', 1), False),
        (GOOD.replace('"event":"Synchronize"', '"event":"synchronize"', 1), False),
        ("[]", False),
        ("", False),
    ],
)
def test_json_corners(text: str, structs_take: bool) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    assert assert_subset(raw, text[:40]) == structs_take


def test_an_unsigned_64_bit_value_above_int64_is_refused_naming_the_field() -> None:
    doc = copy.deepcopy(SYNC)
    resources = doc["containers"][0].setdefault("linux", {}).setdefault("resources", {})
    resources["cpu"] = {"shares": 2**64 - 1}  # LinuxCPU.shares is an unsigned 64-bit value
    raw = orjson.dumps(doc)
    assert request_structs.decode(raw) is None
    assert model_of(raw) is not None  # the model's bound is uint64's; the decoder's int64's
    with pytest.raises(RequestError) as info:
        parse_request(raw)
    assert info.value.detail[0]["loc"] == [
        "body", "containers", 0, "linux", "resources", "cpu", "shares"]


def test_a_request_without_api_version_is_refused_as_before() -> None:
    doc = {k: v for k, v in SYNC.items() if k != "api_version"}
    clean = request_structs.decode(orjson.dumps(doc))
    assert clean is not None and clean.api_version is request_structs.ABSENT
    with pytest.raises(Exception, match="api_version"):
        parse_request(orjson.dumps(doc))


def test_synchronize_event_from_the_bridge_state_is_the_models() -> None:
    pods, containers = SYNC["pods"], SYNC["containers"]
    fast = synchronize_event("resync", pods, containers)
    state = WebhookRequest.model_validate_json(orjson.dumps(SYNC), strict=True)
    assert state.pods is not None and state.containers is not None
    assert fast.pods == tuple(request_event.pod_of(p) for p in state.pods)
    assert fast.containers == tuple(request_event.container_of(c) for c in state.containers)


def scalar_paths(desc: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> Iterator[Any]:
    """(path, field) for every scalar field under an NRI message (a list or map holds one)."""
    for fd in desc.fields:
        message = fd.message_type
        if message is not None and message.GetOptions().map_entry:
            value = message.fields_by_name["value"]
            if value.message_type is not None and not is_wrapper(value.message_type):
                yield from scalar_paths(value.message_type, (*prefix, fd.name, "k"), depth + 1)
            else:
                yield (*prefix, fd.name, "k"), value
        elif message is not None and not is_wrapper(message):
            step = (*prefix, fd.name, 0) if fd.is_repeated else (*prefix, fd.name)
            if depth < 6:
                yield from scalar_paths(message, step, depth + 1)
        elif message is not None:  # an Optional* wrapper: its value, plainly
            inner = message.fields_by_name["value"]
            yield ((*prefix, fd.name, 0) if inner.is_repeated else (*prefix, fd.name)), inner
        else:
            yield ((*prefix, fd.name, 0) if fd.is_repeated else (*prefix, fd.name)), fd


def placed(path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    return [placed(rest, value)] if head == 0 else {head: placed(rest, value)}


INT_EDGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
}


def edge_values(fd: Any) -> list[Any]:
    if fd.type in INT_EDGES:
        lo, hi = INT_EDGES[fd.type]
        return [lo - 1, lo, hi, hi + 1, 1.0, "1"]
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return [next(iter(fd.enum_type.values_by_name)), "NO_SUCH_VALUE", 7, 2**70, 1.0]
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return [True, 1, "true", None]
    return ["x", 1, True, None, ["x"]]


@pytest.mark.parametrize("message", ["PodSandbox", "Container"])
def test_every_field_at_its_edges(message: str) -> None:
    desc = api_pb2.DESCRIPTOR.message_types_by_name[message]
    key = "pods" if message == "PodSandbox" else "containers"
    checked = taken = 0
    for path, fd in scalar_paths(desc):
        for value in edge_values(fd):
            doc = {**ENVELOPE, key: [placed(path, value)]}
            raw = json.dumps(doc).encode()  # orjson stops at 64-bit integers
            taken += assert_subset(raw, f"{message}.{path}={value!r}")
            checked += 1
    assert checked > 200 and taken > 50
