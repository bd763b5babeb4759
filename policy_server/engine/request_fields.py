"""The decoded request's strings checked against their fields' limits: the first one refused.

The limits are the contract's table (``bridge.contract.field_limits``); which string obeys which
is read from the Structs the decoder decodes into (``msgspec.inspect``: every field, list item,
map key and map value, per message) and compiled once into a check per Struct, so no field is
checked by hand. The length bound is in the Structs' types (msgspec refuses a longer string
while decoding); this walk checks the rest. Checking every string of every request would cost
about as much as decoding it, and control characters are rare: JSON carries U+0000-U+001F only
as an escape (``\\u0000``, ``\\n``; a raw one is not JSON) and DEL as it is, so
``walk_needed`` reads the body's bytes for a backslash and a DEL first (two ``memchr``) and
picks the walk:

- ``SHAPES`` (no escape for a control character: nearly every body): the path-shaped fields
  only (cgroup, mount, hook, device and namespace paths), the branches that hold none skipped;
- ``STRICT`` (``\\n``, ``\\r``, ``\\t`` escapes, which free text may hold): the strings that
  may not (names, paths, map keys);
- ``FULL`` (an escape for another control character, or a DEL): every string.

Owns the walk and the refusal's place (a path into the request). Must not: decide a limit (the
table does), raise HTTP errors, or do I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import msgspec.inspect as mi

from bridge.contract.field_limits import FIELDS, KEY, TEXT, FieldLimit, limit_problem

# Escapes for control characters free text may hold, and for any other (module docstring).
_SOFT_CONTROL = re.compile(rb"\\[nrt]")
_HARD_CONTROL = re.compile(rb"\\(?:u00[01]|u007[fF]|[bf])")
SHAPES, STRICT, FULL = "shapes", "strict", "full"

Step = str | int


@dataclass(frozen=True, slots=True)
class FieldRefusal:
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


# A compiled check: the first broken string under a value, as (its path, innermost step first;
# the problem), or None.
Found = tuple[list[Step], str]
Check = Callable[[Any], Found | None]
_PLANS: dict[tuple[type, str], Check | None] = {}


def _limit(cls: type, field: str) -> FieldLimit:
    for klass in cls.__mro__:  # Adjustment is a ContainerAdjustment
        found = FIELDS.get((klass.__name__, field))
        if found is not None:
            return found
    return TEXT


def _string(limit: FieldLimit, walk: str) -> Check | None:
    rule = _rule(limit, walk)
    if rule is None:
        return None

    def checked(value: Any) -> Found | None:
        message = rule(value)
        return None if message is None else ([], message)

    return checked


def _items(inner: Check) -> Check:
    def items(value: Any) -> Found | None:
        for i, item in enumerate(value):
            if item is not None and (found := inner(item)) is not None:
                found[0].append(i)
                return found
        return None

    return items


def _map(keyed: bool, inner: Check | None) -> Check:
    def entries(value: Any) -> Found | None:
        for key, item in value.items():
            if keyed and (message := limit_problem(KEY, key)) is not None:
                return [], f"a key {message}"
            if inner is not None and item is not None and (found := inner(item)) is not None:
                found[0].append(key)
                return found
        return None

    return entries


def _node(t: Any, limit: FieldLimit, walk: str) -> Check | None:
    t = _bare(t)
    if isinstance(t, mi.UnionType):  # X | None, an enum's Literal | int
        nodes = [n for n in (_node(x, limit, walk) for x in t.types) if n is not None]
        return nodes[0] if nodes else None
    if isinstance(t, mi.StrType):
        return _string(limit, walk)
    if isinstance(t, mi.ListType):
        inner = _node(t.item_type, limit, walk)
        return None if inner is None else _items(inner)
    if isinstance(t, mi.DictType):
        keyed = walk != SHAPES and isinstance(t.key_type, mi.StrType)
        value = _node(t.value_type, limit, walk)
        return _map(keyed, value) if keyed or value is not None else None
    if isinstance(t, mi.StructType):
        return _struct(t, walk)
    return None  # integers, booleans, Literal names: nothing to check


def _struct(t: Any, walk: str) -> Check | None:
    key = (t.cls, walk)
    if key in _PLANS:
        return _PLANS[key]
    # A string field's rule is called from the Struct's own loop (one call less a string: most
    # of what the SHAPES walk does); lists, maps and Structs through their checks.
    rules: list[tuple[str, Callable[[str], str | None]]] = []
    nested: list[tuple[str, Check]] = []
    for f in t.fields:
        limit = _limit(t.cls, f.name)
        if _is_string(f.type):
            rule = _rule(limit, walk)
            if rule is not None:
                rules.append((f.name, rule))
        elif (node := _node(f.type, limit, walk)) is not None:
            nested.append((f.name, node))
    check: Check | None = None
    if rules or nested:
        strings, others = tuple(rules), tuple(nested)

        def struct(value: Any) -> Found | None:
            for attr, rule in strings:
                item = getattr(value, attr)
                if item and (message := rule(item)) is not None:
                    return [attr], message
            for attr, inner in others:
                item = getattr(value, attr)
                if item is not None and (found := inner(item)) is not None:
                    found[0].append(attr)
                    return found
            return None

        check = struct
    _PLANS[key] = check
    return check


def _bare(t: Any) -> Any:
    """``t`` without the declaration's schema text (``Annotated[..., Meta(description=...)]``)."""
    while isinstance(t, mi.Metadata):
        t = t.type
    return t


def _is_string(t: Any) -> bool:
    t = _bare(t)
    types = tuple(map(_bare, t.types)) if isinstance(t, mi.UnionType) else (t,)
    return any(isinstance(x, mi.StrType) for x in types) and all(
        isinstance(x, mi.StrType | mi.NoneType) for x in types
    )


def _rule(limit: FieldLimit, walk: str) -> Callable[[str], str | None] | None:
    """What a string of ``limit`` is checked with in ``walk`` (None: nothing)."""
    if walk == SHAPES:
        return limit.shape
    if walk == STRICT and limit.newlines:
        return None
    return lambda value: limit_problem(limit, value)


def plan(cls: type[msgspec.Struct], walk: str) -> Check | None:
    """The check of a ``cls``: its path-shaped strings' shapes (``SHAPES``), every string
    (``FULL``), or those that may not hold a line break (``STRICT``)."""
    key = (cls, walk)
    if key in _PLANS:
        return _PLANS[key]
    return _struct(mi.type_info(cls), walk)


def walk_needed(raw: bytes) -> str:
    """Which walk the JSON text ``raw`` needs: ``SHAPES`` (it holds no control character),
    ``STRICT`` or ``FULL`` (module docstring)."""
    if b"\x7f" in raw:  # DEL: JSON need not escape it
        return FULL
    if b"\\" not in raw:  # no escape at all (one memchr)
        return SHAPES
    if _HARD_CONTROL.search(raw) is not None:
        return FULL
    return STRICT if _SOFT_CONTROL.search(raw) is not None else SHAPES


def refusal(value: msgspec.Struct, walk: str, prefix: Sequence[Step] = ()) -> FieldRefusal | None:
    """The first string of ``value`` whose field refuses it (``walk``: ``walk_needed``'s
    answer for the body it came from). ``prefix``: ``value``'s place."""
    check = plan(type(value), walk)
    found = None if check is None else check(value)
    if found is None:
        return None
    steps, message = found
    return FieldRefusal((*prefix, *reversed(steps)), message)
