"""The event catalogue is defined once: every other event list is derived from it.

Three kinds of proof: the catalogue agrees with api.proto (the wire facts); every view and every
consumer's table is the catalogue's object or its projection; and no module in bridge/ or
policy_server/ spells a complete event list of its own.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect

import policy_server
from bridge.contract import catalogue as cat
from bridge.contract import request_body, request_structs
from bridge.contract.catalogue import CATALOGUE, EventName, NriEvent
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks import guard
from bridge.webhooks import specs as webhook_config
from policy_server.engine import evaluate as engine
from policy_server.sdk import model

ROOT = Path(__file__).resolve().parents[3]


def test_event_numbers_are_api_proto_numbers() -> None:
    proto = {v.name: v.number for v in api.DESCRIPTOR.enum_types_by_name["Event"].values}
    proto.pop("UNKNOWN")
    assert proto.pop("LAST") == 15
    assert {e.name: e.value for e in NriEvent} == proto


def test_names_cover_every_event_plus_synchronize() -> None:
    assert [n.name for n in EventName if n is not EventName.SYNCHRONIZE] == sorted(
        (e.name for e in NriEvent), key=lambda name: list(EventName.__members__).index(name))
    assert {n.name for n in EventName} == {e.name for e in NriEvent} | {"SYNCHRONIZE"}
    assert list(CATALOGUE) == list(EventName)
    for name, spec in CATALOGUE.items():
        assert spec.name is name
        assert (spec.event is None) == (name is EventName.SYNCHRONIZE)
        if spec.event is not None:
            assert spec.event.rpc_name == name.value


def test_dedicated_rpcs_carry_the_catalogue_types() -> None:
    # Every event the Plugin service has an RPC for takes and returns the catalogue's types.
    service = api.DESCRIPTOR.services_by_name["Plugin"]
    dedicated = [m for m in service.methods if m.name in CATALOGUE]
    assert {m.name for m in dedicated} >= {"Synchronize", "CreateContainer", "UpdateContainer",
                                          "StopContainer"}
    for method in dedicated:
        spec = CATALOGUE[EventName(method.name)]
        assert method.input_type is spec.request_type.DESCRIPTOR
        assert method.output_type is spec.response_type.DESCRIPTOR


def test_payload_keys_are_request_fields() -> None:
    for spec in CATALOGUE.values():
        fields = [f.name for f in spec.request_type.DESCRIPTOR.fields]
        assert set(spec.payload) <= set(fields), spec.name
        assert list(spec.payload) == [f for f in fields if f in spec.payload], spec.name


def test_views_are_projections_of_the_catalogue() -> None:
    rows = list(CATALOGUE.values())
    events = [r for r in rows if r.event is not None]
    assert tuple(r.name.value for r in rows) == cat.EVENT_NAMES
    assert dict(cat.REQUEST_TYPES) == {r.event: r.request_type for r in events}
    assert dict(cat.RESPONSE_TYPES) == {r.event: r.response_type for r in events}
    assert dict(cat.RPC_NAMES) == {r.event: r.name.value for r in events}
    assert dict(cat.EVENTS_BY_RPC) == {r.name.value: r.event for r in events}
    assert dict(cat.REQUEST_PAYLOAD) == {r.name.value: r.payload for r in rows}
    assert dict(cat.REPLY_KEYS) == {r.name.value: r.reply_keys for r in rows}
    assert {r.name for r in rows if "container" in r.payload} == cat.CONTAINER_EVENTS
    assert {r.event for r in events if r.payload[0] == "pod"
                              and "container" not in r.payload} == cat.POD_EVENTS
    assert cat.supported_mask((0, 12, 0)) == cat.mask_of(set(NriEvent))
    # v0.10.0 added events 12-14 (the `since` column); a runtime before it knows 1-11.
    assert cat.known_to((0, 9, 1)) == {e for e in NriEvent if e.value < 12}
    assert cat.known_to(None) == cat.known_to((0, 9, 1))


def test_consumers_use_the_catalogue_objects() -> None:
    assert policy_server.EventName is EventName
    # Each consumer's own binding of the name, read from its namespace (imported there, not
    # re-exported, so not an attribute the type checker lets other modules use).
    assert vars(model)["API_VERSION"] is cat.API_VERSION
    assert vars(engine)["REPLY_KEYS"] is cat.REPLY_KEYS
    assert vars(guard)["REPLY_KEYS"] is cat.REPLY_KEYS
    assert vars(request_body)["REQUEST_PAYLOAD"] is cat.REQUEST_PAYLOAD
    assert vars(request_body)["API_VERSION"] is cat.API_VERSION
    info = msgspec.inspect.type_info(request_structs.WebhookRequest)
    assert isinstance(info, msgspec.inspect.StructType)
    fields = info.fields
    types: dict[str, Any] = {f.name: getattr(f.type, "type", f.type)  # Annotated: its type
                             for f in fields}
    assert set(types["event"].values) == set(cat.EVENT_NAMES)
    assert tuple(types["api_version"].values) == (cat.API_VERSION,)
    spec_events = webhook_config._Webhook.model_fields["events"].annotation
    assert typing.get_args(typing.get_args(spec_events)[0]) == cat.EVENT_NAMES


def _complete_lists(path: Path) -> list[int]:
    """Line numbers of literal collections in `path` that name every event (a second list)."""
    names = set(cat.EVENT_NAMES)
    members = {e.name for e in NriEvent}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            continue
        items = [k for k in node.keys if k is not None] if isinstance(node, ast.Dict) \
            else node.elts
        strings = {i.value for i in items if isinstance(i, ast.Constant)} & names
        attrs = {i.attr for i in items if isinstance(i, ast.Attribute)} & members
        if len(strings) >= len(NriEvent) or len(attrs) >= len(NriEvent):
            found.append(node.lineno)
    return found


SOURCES = sorted(
    p for pkg in ("bridge", "policy_server") for p in (ROOT / pkg).rglob("*.py")
    if not p.name.endswith("_pb2.py") and p.name != "catalogue.py"
)


def test_the_scan_finds_a_copied_list(tmp_path: Path) -> None:
    copy = tmp_path / "copy.py"
    copy.write_text(f"NAMES = {list(cat.EVENT_NAMES)!r}\nBY = {{"
                    + ", ".join(f"NriEvent.{e.name}: 1" for e in NriEvent) + "}\n")
    assert _complete_lists(copy) == [1, 2]


def test_no_module_keeps_its_own_event_list() -> None:
    assert len(SOURCES) > 100
    copies = {str(p.relative_to(ROOT)): lines for p in SOURCES if (lines := _complete_lists(p))}
    assert copies == {}, "derive event lists from bridge.contract.catalogue"


def test_the_changes_a_reply_may_make_are_what_the_response_carries() -> None:
    """`adjust`, `update` and `evict` are reply keys exactly where api.proto's response message
    has that field; the webhook handler, the state cache and the simulator ask the catalogue."""
    for name, spec in cat.CATALOGUE.items():
        fields = set(spec.response_type.DESCRIPTOR.fields_by_name)
        for change in ("adjust", "update", "evict"):
            assert (change in spec.reply_keys) == (change in fields), (name, change)
        assert spec.carries_update == ("update" in fields)
    assert {s.name for s in cat.CATALOGUE.values() if s.carries_update} == {
        cat.EventName.SYNCHRONIZE, cat.EventName.CREATE_CONTAINER,
        cat.EventName.UPDATE_CONTAINER, cat.EventName.STOP_CONTAINER}
    update = api.ContainerUpdate(container_id="c1")
    assert list(cat.updates_in(api.StopContainerResponse(update=[update]))) == [update]
    assert list(cat.updates_in(api.ValidateContainerAdjustmentResponse(reject=True))) == []
    assert list(cat.updates_in(None)) == []
