"""The request's one declaration (``bridge.contract.request_structs``) seen from both ends: the
policy server's decoder (``parse_request``) takes a body exactly when the published JSON Schema
of its event does (jsonschema), on every recorded request, on thousands of deterministic
mutations of them, on the JSON corners where two parsers can differ and on every scalar field
at its edges. A 400 (a string breaking its field's limits: control characters, path shapes,
which a schema states only in part) is left out of the comparison."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.protobuf.descriptor import FieldDescriptor

from bridge.contract import request_structs
from bridge.contract import schema as contract_schema
from bridge.contract.catalogue import API_VERSION, REQUEST_PAYLOAD
from bridge.contract.convert import is_wrapper
from bridge.proto.nri import api_pb2
from policy_server.engine.request import parse_request
from policy_server.exceptions import RequestError
from tests.policy_server.engine.test_request_path import (
    DELETE,
    REQUESTS,
    json_paths,
    schema_takes,
    with_change,
)

# Values a mutation puts somewhere: wrong JSON types, integer edges of every NRI width, enum
# names that do not exist, strings a lax parser would coerce.
ODD_VALUES: list[Any] = [
    None, "", "5", "true", 5, 0, -1, 1.5, 5.0, True, False, [], {}, {"x": 1}, ["a"], [1],
    2**31 - 1, 2**31, -(2**31) - 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, -(2**63),
    "CONTAINER_RUNNING", "CONTAINER_FOO", "NAMESPACE_UNKNOWN", "\u0000", "é",
]
MUTATIONS_PER_BODY = 24
ENVELOPE: dict[str, Any] = {
    "api_version": API_VERSION,
    "uid": "u1",
    "event": "Synchronize",
    "runtime": {"name": "containerd", "version": "2.1.9"},
    "budget_ms": 1500,
}
SEED = 20261127


def agree(raw: bytes, where: str) -> bool:
    """The decoder and the published schema give ``raw`` the same answer; True if taken."""
    try:
        parse_request(raw)
    except RequestError as refused:
        if refused.status == 400:
            return False
        assert not schema_takes(raw), f"{where}: the schema takes a body the server refuses " \
            f"({refused.detail}): {raw[:300]!r}"
        return False
    assert schema_takes(raw), f"{where}: the server takes a body the schema refuses: {raw!r}"
    return True


def mutated(doc: dict[str, Any], paths: list[tuple[Any, ...]],
            rng: random.Random) -> dict[str, Any]:
    """``doc`` with one key deleted, one odd value put in, or an unknown key added, at one of
    its ``paths``."""
    path = rng.choice(paths)
    action = rng.randrange(4)
    if action == 0 and isinstance(path[-1], str):
        return with_change(doc, path, DELETE)
    if action == 1 and isinstance(path[-1], str):
        key = rng.choice(["zzz", "Pid", "id ", "labels"])
        return with_change(doc, (*path[:-1], key), rng.choice(ODD_VALUES))
    return with_change(doc, path, rng.choice(ODD_VALUES))


def test_the_recorded_requests_are_taken_by_both() -> None:
    taken = 0
    for where, doc in REQUESTS:
        raw = orjson.dumps(doc)
        assert agree(raw, where), f"{where}: refused"
        taken += 1
    assert taken > 100  # the fast path is the common path


# The mutation walk is CPU-bound (the schema check of every body): in shards, so pytest-xdist's
# workers share it and no one test comes near the suite's per-test timeout on a busy machine.
SHARDS = 8


@pytest.mark.parametrize("shard", range(SHARDS))
def test_a_mutated_request_is_taken_by_the_server_exactly_when_the_schema_takes_it(
        shard: int) -> None:
    rng = random.Random(SEED + shard)
    taken = refused = 0
    for where, doc in REQUESTS[shard::SHARDS]:
        paths = list(json_paths(doc))
        for n in range(MUTATIONS_PER_BODY):
            raw = orjson.dumps(mutated(doc, paths, rng))
            if agree(raw, f"{where} mutation {n}"):
                taken += 1
            else:
                refused += 1
    # Both sides of the subset are exercised in every shard (about 24 bodies x 24 mutations).
    assert taken > 1000 // SHARDS and refused > 1000 // SHARDS


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
    ("text", "taken"),
    [
        (GOOD, True),
        (GOOD + " \n\t", True),
        (GOOD.replace('"uid"', '"\\u0075id"', 1), True),  # an escaped key is the same key
        (with_first("uid", '"first"'), True),  # both read the last of a duplicated key
        (with_first("uid", "5"), False),  # msgspec checks every value of a duplicated key
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
def test_json_corners(text: str, taken: bool) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    if text.startswith('{"api_version') and '"uid":5,"uid"' in text:
        # The one corner where they differ: JSON Schema sees only the last of a duplicated key
        # (json.loads keeps it), the decoder refuses a wrong earlier one. Documented.
        with pytest.raises(RequestError):
            parse_request(raw)
        assert schema_takes(raw)
        return
    assert agree(raw, text[:40]) == taken


def test_an_unsigned_64_bit_value_above_int64_is_refused_by_both_naming_the_field() -> None:
    doc = copy.deepcopy(SYNC)
    resources = doc["containers"][0].setdefault("linux", {}).setdefault("resources", {})
    resources["cpu"] = {"shares": 2**63}  # LinuxCPU.shares is an unsigned 64-bit value
    raw = orjson.dumps(doc)
    assert not schema_takes(raw)  # the schema's maximum is the decoder's: 2**63 - 1
    with pytest.raises(RequestError) as info:
        parse_request(raw)
    assert info.value.detail[0]["loc"] == [
        "body", "containers", 0, "linux", "resources", "cpu", "shares"]
    resources["cpu"] = {"shares": 2**63 - 1}
    assert agree(orjson.dumps(doc), "shares 2**63 - 1")


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
            doc = {**ENVELOPE, "pods": [], "containers": [], key: [placed(path, value)]}
            raw = json.dumps(doc).encode()  # orjson stops at 64-bit integers
            taken += agree(raw, f"{message}.{path}={value!r}")
            checked += 1
    assert checked > 200 and taken > 50


EXAMPLES = sorted((Path(__file__).parents[3] / "schemas" / "webhook" / "examples").glob(
    "*.request.json"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name.split(".")[0])
def test_every_required_and_every_foreign_key_is_the_same_to_both(path: Path) -> None:
    """Per event: each key its schema requires, taken out, and each payload key of another
    event, put in, are refused by the server and by the schema alike; the example is taken."""
    doc = json.loads(path.read_text())
    event = doc["event"]
    assert agree(orjson.dumps(doc), event)
    schema = contract_schema.build()[f"events/{event}.request.schema.json"]
    assert "api_version" in schema["required"]
    for key in schema["required"]:
        without = {k: v for k, v in doc.items() if k != key}
        assert not agree(orjson.dumps(without), f"{event} without {key}")
    foreign = [k for k in request_structs.PAYLOAD_KEYS if k not in REQUEST_PAYLOAD[event]]
    assert foreign
    for key in foreign:
        value: Any = [] if key in ("pods", "containers", "update", "plugins") else {}
        assert not agree(orjson.dumps({**doc, key: value}), f"{event} with {key}")
