"""The decoded request's strings checked against their limits: the first one that breaks its own.

The limits are the contract's table (``bridge.contract.field_limits``); which string obeys which
is read from the Structs the decoder decodes into (``msgspec.inspect``: every field, list item,
map key and map value, per message), so no field is checked by hand. The length bound is in the
Structs' types already (msgspec refuses a longer string while decoding); this walk checks the
rest, in two passes of different cost:

- the path shapes (``cgroups_path``, mount, hook and device paths, ...) on every request: only
  the branches that can hold such a field are walked;
- control characters only when the body can hold one: JSON carries a control character only as
  an escape (``\\u0000``, ``\\n``; a raw one is not JSON), so a body without such an escape holds
  none, and the walk over every string is skipped (``may_hold_controls``).

Owns the walk and the refusal's place (a path into the request). Must not: decide a limit (the
table does), raise HTTP errors, or do I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import msgspec.inspect as mi

from bridge.contract.field_limits import FIELDS, KEY, TEXT, Limit, problem

# A JSON escape that may stand for a control character (see the module docstring).
_CONTROL_ESCAPE = re.compile(rb"\\(?:u00[01]|u007[fF]|[bfnrt])")

Step = str | int


@dataclass(frozen=True, slots=True)
class Refusal:
    """Where a string breaks its limit (``loc``: keys and indexes from the request's root) and
    how (``message``: ``contains a NUL byte``; ``a key contains ...`` when a map's key broke it,
    ``loc`` then ends at the map)."""

    loc: tuple[Step, ...]
    message: str

    def field(self) -> str:
        """``("containers", 3, "linux", "cgroups_path")`` -> ``containers[3].linux.cgroups_path``;
        a map key is written ``labels["..."]``."""
        out = ""
        for step in self.loc:
            if isinstance(step, int):
                out += f"[{step}]"
            elif not out:
                out = step
            elif step.isidentifier():
                out += f".{step}"
            else:
                out += "[" + msgspec.json.encode(step).decode() + "]"
        return out

    def text(self) -> str:
        """``container.linux.cgroups_path: contains a NUL byte``."""
        return f"{self.field()}: {self.message}"


# A node of a Struct's plan: ("s", limit) a string; ("l", node) a list; ("m", keyed, node) a
# map (keyed: its keys are strings, checked as KEY; node may be None); ("t", fields) a Struct,
# fields ((attribute, node), ...).
Node = tuple[Any, ...]
_PLANS: dict[tuple[type, bool], Node | None] = {}


def _limit(cls: type, field: str) -> Limit:
    for klass in cls.__mro__:  # WebhookRequest is a Request; Adjustment a ContainerAdjustment
        found = FIELDS.get((klass.__name__, field))
        if found is not None:
            return found
    return TEXT


def _node(t: Any, limit: Limit, shapes: bool) -> Node | None:
    if isinstance(t, mi.UnionType):  # X | None, an enum's Literal | int
        nodes = [n for n in (_node(x, limit, shapes) for x in t.types) if n is not None]
        return nodes[0] if nodes else None
    if isinstance(t, mi.StrType):
        return ("s", limit) if not shapes or limit.shape is not None else None
    if isinstance(t, mi.ListType):
        inner = _node(t.item_type, limit, shapes)
        return None if inner is None else ("l", inner)
    if isinstance(t, mi.DictType):
        keyed = not shapes and isinstance(t.key_type, mi.StrType)
        inner = _node(t.value_type, limit, shapes)
        return ("m", keyed, inner) if keyed or inner is not None else None
    if isinstance(t, mi.StructType):
        return _struct(t, shapes)
    return None  # integers, booleans, Literal names: nothing to check


def _struct(t: Any, shapes: bool) -> Node | None:
    key = (t.cls, shapes)
    if key not in _PLANS:
        fields = []
        for f in t.fields:
            node = _node(f.type, _limit(t.cls, f.name), shapes)
            if node is not None:
                fields.append((f.name, node))
        _PLANS[key] = ("t", tuple(fields)) if fields else None
    return _PLANS[key]


def plan(cls: type[msgspec.Struct], shapes: bool) -> Node | None:
    """What to walk in a ``cls``: the path-shaped strings only (``shapes``), or every string."""
    key = (cls, shapes)
    if key in _PLANS:
        return _PLANS[key]
    return _struct(mi.type_info(cls), shapes)


def _walk(node: Node, value: Any) -> tuple[list[Step], str] | None:
    """The first broken string under ``value``: (its path, innermost first; the problem)."""
    kind = node[0]
    if kind == "t":
        for attr, sub in node[1]:
            inner = getattr(value, attr)
            if inner is not None and (found := _walk(sub, inner)) is not None:
                found[0].append(attr)
                return found
    elif kind == "s":
        message = problem(node[1], value)
        if message is not None:
            return [], message
    elif kind == "l":
        sub = node[1]
        for i, item in enumerate(value):
            if item is not None and (found := _walk(sub, item)) is not None:
                found[0].append(i)
                return found
    else:  # "m"
        keyed, sub = node[1], node[2]
        for k, item in value.items():
            if keyed and (message := problem(KEY, k)) is not None:
                return [], f"a key {message}"
            if sub is not None and item is not None and (found := _walk(sub, item)) is not None:
                found[0].append(k)
                return found
    return None


def may_hold_controls(raw: bytes) -> bool:
    """Whether the JSON text ``raw`` can hold a control character (an escape for one)."""
    return _CONTROL_ESCAPE.search(raw) is not None


def refusal(
    value: msgspec.Struct, controls: bool, prefix: Sequence[Step] = ()
) -> Refusal | None:
    """The first string of ``value`` that breaks its limit; ``controls``: check every string
    (else only the path shapes; ``may_hold_controls``). ``prefix``: ``value``'s place."""
    node = plan(type(value), shapes=not controls)
    found = None if node is None else _walk(node, value)
    if found is None:
        return None
    steps, message = found
    return Refusal((*prefix, *reversed(steps)), message)
