"""The SDK reaches every field of the webhook contract (issue 33): walks the JSON Schemas of every
event's request and reply, leaf field by leaf field.

- A request field is **typed** when setting it changes the ``Event`` a handler gets (its body,
  and an adjustment's ``extra``, aside); every other one must be listed in ``REQUEST_RAW_ONLY``,
  the fields a policy reads through ``Event.json()`` (docs/policy-server.md lists the same).
- A reply field is reachable when a ``Decision`` carries it to the reply unchanged: the maximal
  reply of each event (every field set) round-trips through the SDK's values. Those it carries
  only in ``Adjustment.extra`` must be listed in ``ADJUST_EXTRA_ONLY``.

A new contract field therefore fails here until it is typed or listed (and documented).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bridge.contract import value_rules
from policy_server.engine.reply import check_reply, decision_to_reply, encode_reply
from policy_server.engine.request import parse_request
from policy_server.sdk.decision import Decision, Eviction
from policy_server.sdk.decision_json import adjustment_from_json, update_from_json
from policy_server.sdk.limit_checks import request_values
from policy_server.sdk.model import Event

SCHEMAS = Path(__file__).parents[3] / "schemas" / "webhook" / "events"
ITEM, KEY = "[]", "{}"  # a path part: an array's item, a map's value
KeyPath = tuple[str, ...]

# Request fields a policy reads through Event.json() (paths of containers[] and pods[] are
# written as container. and pod.); a validator's adjust.* ones are in Event.adjust.extra too.
REQUEST_RAW_ONLY = frozenset({
    "adjust.linux.cgroups_path",
    "adjust.linux.io_priority",
    "adjust.linux.memory_policy",
    "adjust.linux.namespaces",
    "adjust.linux.net_devices",
    "adjust.linux.rdt",
    "adjust.linux.scheduler",
    "adjust.linux.seccomp_policy",
    "container.created_at",
    "container.finished_at",
    "container.hooks",
    "container.linux.cgroups_path",
    "container.linux.devices",
    "container.linux.io_priority",
    "container.linux.namespaces",
    "container.linux.net_devices",
    "container.linux.rdt",
    "container.linux.resources.devices",
    "container.linux.resources.memory.disable_oom_killer",
    "container.linux.resources.memory.kernel",
    "container.linux.resources.memory.kernel_tcp",
    "container.linux.resources.memory.use_hierarchy",
    "container.linux.scheduler",
    "container.linux.seccomp_policy",
    "container.linux.seccomp_profile",
    "container.started_at",
    "linux_resources.devices",
    "linux_resources.memory.disable_oom_killer",
    "linux_resources.memory.kernel",
    "linux_resources.memory.kernel_tcp",
    "linux_resources.memory.use_hierarchy",
    "overhead_linux_resources",
    "pod.linux.namespaces",
    "pod.linux.pod_overhead",
    "pod.linux.pod_resources",
    "pod.linux.resources",
    "pod.pid",
})
# Reply adjustment fields a policy sets through Adjustment.extra.
ADJUST_EXTRA_ONLY = frozenset({
    "adjust.linux.cgroups_path",
    "adjust.linux.io_priority",
    "adjust.linux.memory_policy",
    "adjust.linux.namespaces",
    "adjust.linux.net_devices",
    "adjust.linux.rdt",
    "adjust.linux.scheduler",
    "adjust.linux.seccomp_policy",
})


class Schema:
    def __init__(self, path: Path) -> None:
        self.doc = json.loads(path.read_text())
        self.defs: Mapping[str, Any] = self.doc.get("$defs", {})

    def resolve(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        """``node`` without ``$ref`` or a nullable ``anyOf`` (its first non-null option)."""
        while True:
            if "$ref" in node:
                node = self.defs[node["$ref"].rsplit("/", 1)[1]]
            elif "anyOf" in node:
                node = next(o for o in node["anyOf"] if o.get("type") != "null")
            else:
                return node

    def leaves(self, node: Mapping[str, Any], at: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
        """(path, schema) of every leaf: a scalar, or an array or map of scalars."""
        node = self.resolve(node)
        if "properties" in node:
            for key, sub in node["properties"].items():
                yield from self.leaves(sub, (*at, key))
            return
        inner = node.get("items") if node.get("type") == "array" else node.get(
            "additionalProperties")
        if isinstance(inner, Mapping) and "properties" in self.resolve(inner):
            yield from self.leaves(inner, (*at, ITEM if node.get("type") == "array" else KEY))
            return
        yield at, node

    def value(self, node: Mapping[str, Any]) -> Any:
        """A value the contract takes for a leaf."""
        node = self.resolve(node)
        kind = node.get("type")
        if "enum" in node:
            return node["enum"][-1]
        if kind == "integer":
            return min(max(7, node.get("minimum", 7)), node.get("maximum", 7))
        if kind == "boolean":
            return True
        if kind == "string":  # absolute: path fields must be (bridge.contract.field_limits)
            return _fitting("/x7", node)
        if kind == "array":
            return [self.value(node["items"])]
        if kind == "object":
            return {_fitting("7", node.get("propertyNames", {})):
                    self.value(node["additionalProperties"])}
        raise AssertionError(f"no value for {node}")

    def full(self, node: Mapping[str, Any]) -> Any:
        """A document with every field of ``node`` set."""
        node = self.resolve(node)
        if "properties" in node:
            return {key: self.full(sub) for key, sub in node["properties"].items()}
        inner = node.get("items") if node.get("type") == "array" else node.get(
            "additionalProperties")
        if isinstance(inner, Mapping) and "properties" in self.resolve(inner):
            item = self.full(inner)
            return [item] if node.get("type") == "array" else {"7": item}
        return self.value(node)


def _fitting(default: str, node: Mapping[str, Any]) -> str:
    """``default``, or for a grammar of the contract (value_rules) a value inside it."""
    pattern = node.get("pattern")
    if pattern is None or value_rules.compile_pattern(pattern).search(default):
        return default
    for rule in value_rules.RULES:
        check = rule.check
        if isinstance(check, value_rules.Text) and check.pattern == node.get("pattern"):
            return check.inside[-1]
    raise AssertionError(f"no value for {node}")


def _with_parents(base: dict[str, Any], at: KeyPath) -> dict[str, Any]:
    """``base`` with the objects, items and map values above ``at`` present (and empty)."""
    doc = copy.deepcopy(base)
    node: Any = doc
    parts = list(at[:-1])
    i = 0
    while i < len(parts):
        part = parts[i]
        nxt = parts[i + 1] if i + 1 < len(parts) else None
        if nxt == ITEM:  # an update's container_id is required
            items = node.setdefault(part, [])
            if not items:  # absent, or an empty list the base carries (pods, containers)
                items.append({"container_id": "c"} if part == "update" else {})
            node = items[0]
            i += 2
        elif nxt == KEY:
            node = node.setdefault(part, {"7": {}})["7"]
            i += 2
        else:
            node = node.setdefault(part, {})
            i += 1
    return doc


def _set_leaf(doc: dict[str, Any], at: KeyPath, value: Any) -> None:
    node: Any = doc
    parts = list(at[:-1])
    i = 0
    while i < len(parts):
        nxt = parts[i + 1] if i + 1 < len(parts) else None
        node = node[parts[i]]
        if nxt == ITEM:
            node = node[0]
            i += 2
        elif nxt == KEY:
            node = node["7"]
            i += 2
        else:
            i += 1
    leaf = at[-1]
    node[leaf] = value + 1 if isinstance(node.get(leaf), int) and leaf in node else value


def _base(event: str, schema: Schema) -> dict[str, Any]:
    body: dict[str, Any] = {"api_version": "nri-webhook-bridge/v1", "uid": "u", "event": event,
                            "runtime": {"name": "containerd", "version": "2.1.9"},
                            "budget_ms": 1000}
    for key in schema.doc.get("required", ()):
        if key in ("pod", "container"):
            body[key] = {"id": key[0]}
        elif key in ("pods", "containers"):
            body[key] = []
    return body


def _typed_view(event: Event) -> Event:
    adjust = event.adjust
    if adjust is not None:
        with request_values():  # a request's values: the reply's limits do not apply
            adjust = dataclasses.replace(adjust, extra={})
    return dataclasses.replace(event, body=b"", adjust=adjust)


def _parse(body: dict[str, Any]) -> Event:
    return parse_request(json.dumps(body).encode())


def _name(at: KeyPath) -> str:
    out = ".".join(p for p in at if p not in (ITEM, KEY))
    for plural, one in (("containers.", "container."), ("pods.", "pod.")):
        if out.startswith(plural):
            out = one + out[len(plural):]
    return out


def _compress(raw: set[str], every: set[str]) -> set[str]:
    """The shortest prefixes that hold only raw leaves."""
    def only_raw(prefix: str) -> bool:
        under = [p for p in every if p == prefix or p.startswith(prefix + ".")]
        return all(p in raw for p in under)

    out = set()
    for path in raw:
        parts = path.split(".")
        for n in range(1, len(parts) + 1):
            prefix = ".".join(parts[:n])
            if only_raw(prefix):
                out.add(prefix)
                break
    return out


def request_reach() -> tuple[set[str], set[str]]:
    """(every request leaf, the leaves that leave the typed Event unchanged), by _name."""
    every: set[str] = set()
    raw: set[str] = set()
    for path in sorted(SCHEMAS.glob("*.request.schema.json")):
        schema = Schema(path)
        event = path.name.split(".")[0]
        base = _base(event, schema)
        for at, leaf in schema.leaves(schema.doc):
            if at in (("api_version",), ("event",)):  # the Event's identity: name, api_version
                every.add(_name(at))
                continue
            before = _with_parents(base, at)
            after = copy.deepcopy(before)
            _set_leaf(after, at, schema.value(leaf))
            every.add(_name(at))
            if _typed_view(_parse(before)) == _typed_view(_parse(after)):
                raw.add(_name(at))
    return every, raw


def test_every_request_field_is_typed_or_listed_as_raw() -> None:
    every, raw = request_reach()
    typed = every - raw
    assert len(typed) > 80  # the walk really met the typed fields
    assert _compress(raw, every) == REQUEST_RAW_ONLY


def test_raw_fields_are_in_event_json() -> None:
    schema = Schema(SCHEMAS / "CreateContainer.request.schema.json")
    body = _base("CreateContainer", schema)
    body["container"] = {"id": "c", "linux": {"namespaces": [{"type": "pid", "path": "/p"}]}}
    assert _parse(body).json()["container"]["linux"]["namespaces"] == [
        {"type": "pid", "path": "/p"}]


def _decision(reply: Mapping[str, Any]) -> Decision:
    """The SDK values for a reply (what a policy writes to get it)."""
    return Decision(
        adjust=adjustment_from_json(reply["adjust"]) if "adjust" in reply else None,
        update=tuple(update_from_json(u) for u in reply.get("update", ())),
        evict=tuple(Eviction(e["container_id"], e.get("reason", "")) for e in reply.get(
            "evict", ())),
        reject=reply["reject"]["reason"] if "reject" in reply else None,
        warnings=tuple(reply.get("warnings", ())),
    )


def _leaf_names(doc: Any, at: str) -> Iterator[str]:
    if isinstance(doc, dict) and doc and not all(k == "7" for k in doc):
        for key, value in doc.items():
            yield from _leaf_names(value, f"{at}.{key}" if at else key)
    elif isinstance(doc, list) and doc and isinstance(doc[0], dict):
        yield from _leaf_names(doc[0], at)
    elif isinstance(doc, dict) and doc and isinstance(doc.get("7"), dict):
        yield from _leaf_names(doc["7"], at)
    else:
        yield at


def test_every_reply_field_is_reachable_typed_or_through_extra() -> None:
    extra_only: set[str] = set()
    every: set[str] = set()
    for path in sorted(SCHEMAS.glob("*.reply.schema.json")):
        schema = Schema(path)
        full = schema.full(schema.doc)
        decision = _decision(full)
        assert decision_to_reply(decision) == full, path.name  # every field reaches the reply
        check_reply(encode_reply(decision))  # and the contract takes it
        every |= set(_leaf_names(full, ""))
        if decision.adjust is not None and decision.adjust.extra:
            extra_only |= set(_leaf_names({"adjust": dict(decision.adjust.extra)}, ""))
    assert _compress(extra_only, every) == ADJUST_EXTRA_ONLY
