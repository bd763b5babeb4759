"""The webhook contract: generated schemas are current, examples validate,
proto <-> JSON conversion is lossless for every message of the API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.contract import WebhookReply, nri_adjustment_from_json, nri_adjustment_to_json
from bridge.contract import schema as schema_gen
from bridge.contract.convert import ConversionError, from_json, is_wrapper, to_json
from bridge.contract.request_structs import WebhookRequest
from bridge.contract.webhook_models import EVENT_NAMES
from bridge.proto.nri import api_pb2 as api
from tests.json_schemas import validate

SCHEMAS = schema_gen.SCHEMA_DIR
EXAMPLES = SCHEMAS / "examples"
FD = FieldDescriptor


def test_schemas_are_not_stale() -> None:
    for rel, doc in schema_gen.build().items():
        path = SCHEMAS / rel
        assert path.exists(), f"{rel} missing: run `python -m bridge.contract.schema`"
        assert path.read_text() == schema_gen.render(doc), f"{rel} is stale"


def _load(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.mark.parametrize("event", EVENT_NAMES)
def test_every_event_has_a_valid_example_request(event: str) -> None:
    doc = _load(EXAMPLES / f"{event}.request.json")
    validate(doc, SCHEMAS / "events" / f"{event}.request.schema.json")
    validate(doc, SCHEMAS / "request.schema.json")
    msgspec.json.decode(json.dumps(doc), type=WebhookRequest)  # the declaration takes it


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.reply.json")), ids=lambda p: p.name)
def test_example_replies_validate(path: Path) -> None:
    event = path.name.split(".")[0]
    doc = _load(path)
    validate(doc, SCHEMAS / "events" / f"{event}.reply.schema.json")
    WebhookReply.model_validate(doc)


def test_narrowed_reply_schema_refuses_keys_meaningless_for_the_event() -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate({"adjust": {}}, SCHEMAS / "events" / "UpdateContainer.reply.schema.json")


def test_request_example_payloads_convert_to_proto_and_back() -> None:
    doc = _load(EXAMPLES / "CreateContainer.request.json")
    req = from_json({"pod": doc["pod"], "container": doc["container"]}, api.CreateContainerRequest)
    assert to_json(req) == {"pod": doc["pod"], "container": doc["container"]}


# -- random messages of every type -------------------------------------------------

_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FD.TYPE_STRING: st.text(max_size=8), FD.TYPE_BOOL: st.booleans(),
    FD.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    FD.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: st.integers(0, 2**32 - 1), FD.TYPE_UINT64: st.integers(0, 2**64 - 1),
}


@st.composite
def messages(draw: st.DrawFn, desc: Any, depth: int = 0) -> Message:
    msg: Message | None = getattr(api, desc.name)() if desc.containing_type is None else None
    assert msg is not None
    _fill_random(draw, msg, depth)
    return msg


def _scalar(draw: st.DrawFn, fd: Any) -> Any:
    if fd.type == FD.TYPE_ENUM:
        return draw(st.sampled_from([v.number for v in fd.enum_type.values]))
    return draw(_SCALARS[fd.type])


def _fill_random(draw: st.DrawFn, msg: Message, depth: int) -> None:
    for fd in msg.DESCRIPTOR.fields:
        if not draw(st.booleans()):
            continue
        target = getattr(msg, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            key_fd = fd.message_type.fields_by_name["key"]
            value_fd = fd.message_type.fields_by_name["value"]
            for _ in range(draw(st.integers(0, 2))):
                key = _scalar(draw, key_fd)
                if value_fd.type == FD.TYPE_MESSAGE:
                    if depth < 4:
                        _fill_random(draw, target[key], depth + 1)
                else:
                    target[key] = _scalar(draw, value_fd)
        elif fd.is_repeated:
            for _ in range(draw(st.integers(0, 2))):
                if fd.type == FD.TYPE_MESSAGE:
                    if depth < 4:
                        _fill_random(draw, target.add(), depth + 1)
                else:
                    target.append(_scalar(draw, fd))
        elif fd.type == FD.TYPE_MESSAGE:
            if depth < 4 or is_wrapper(fd.message_type):
                _fill_random(draw, target, depth + 1)
                target.SetInParent()
        else:
            setattr(msg, fd.name, _scalar(draw, fd))


ALL_MESSAGES = sorted(api.DESCRIPTOR.message_types_by_name)


@pytest.mark.parametrize("name", ALL_MESSAGES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_proto_json_roundtrip_is_lossless(name: str, data: st.DataObject) -> None:
    msg = data.draw(messages(api.DESCRIPTOR.message_types_by_name[name]))
    as_json = json.loads(json.dumps(to_json(msg)))  # through real JSON text
    assert from_json(as_json, type(msg)) == msg


def test_wrapper_presence_with_zero_survives() -> None:
    res = api.LinuxResources()
    res.cpu.shares.value = 0
    assert to_json(res) == {"cpu": {"shares": 0}}
    assert from_json({"cpu": {"shares": 0}}, api.LinuxResources).cpu.HasField("shares")


@pytest.mark.parametrize(("doc", "path"), [
    ({"cpu": {"shares": -1}}, "cpu.shares"),
    ({"cpu": {"shares": "512"}}, "cpu.shares"),
    ({"cpu": {"bogus": 1}}, "cpu.bogus"),
    ({"memory": {"limit": 2**63}}, "memory.limit"),
    ({"unified": {"a": 1}}, "unified['a']"),
])
def test_conversion_errors_name_the_path(doc: dict[str, Any], path: str) -> None:
    with pytest.raises(ConversionError) as err:
        from_json(doc, api.LinuxResources)
    assert err.value.path == path


def test_adjustment_removals_are_explicit_and_roundtrip() -> None:
    doc = {"env": [{"key": "A", "value": "1"}], "linux": {"resources": {"cpu": {"shares": 2}}},
           "remove": {"env": ["B"], "mounts": ["/data"], "annotations": ["x"],
                      "devices": ["/dev/fuse"], "namespaces": ["network"], "sysctl": ["net.a"],
                      "net_devices": ["eth1"]}}
    adjust = nri_adjustment_from_json(doc)
    assert [e.key for e in adjust.env] == ["A", "-B"]
    assert adjust.mounts[0].destination == "-/data"
    assert "-x" in adjust.annotations and "-net.a" in adjust.linux.sysctl
    assert adjust.linux.namespaces[0].type == "-network"
    assert nri_adjustment_from_json(nri_adjustment_to_json(adjust)) == adjust
    assert nri_adjustment_to_json(adjust)["remove"]["env"] == ["B"]


def test_marker_prefixes_are_refused_in_positive_part() -> None:
    with pytest.raises(ConversionError, match=r"removals go in adjust\.remove\.env"):
        nri_adjustment_from_json({"env": [{"key": "-PATH"}]})
