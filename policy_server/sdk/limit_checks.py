"""The reply contract's JSON types and value limits, read off its JSON Schema, and the check the
SDK runs on them.

Owns ``LIMITS`` (reply JSON path -> ``Limit``: ``"update/[]/container_id"``, ``"warnings"``,
``"adjust/rlimits/[]/soft"``; ``[]`` is a list's item, ``{}`` a map's value) and ``TYPES`` (path
-> JSON type), walked once from ``bridge.contract.WebhookReply``'s JSON Schema (``type``,
``minimum``/``maximum``, ``minLength``/``maxLength``, ``maxItems``, ``pattern``, ``format``,
``propertyNames``, an ``anyOf`` of ranges), so no type, number or grammar is restated here (the
grammars a ``format`` names are bridge.contract.value_rules.FORMATS); ``checks``, which makes
the check the SDK's value types run when built from their type hints and these (a value of the
wrong type or outside the contract raises ``ValueError`` naming the field); ``read_object`` /
``read_objects`` / ``read_list``, which read reply JSON's objects and lists strictly for the
SDK's ``from_json``; and ``fit_warnings`` / ``fit_reject``, which shorten what the framework
composes from valid parts (merged warnings and reasons) to fit, with a note; and
``request_values``, under which values read from a request (other plugins' merged adjustment)
are checked for their types only. Must not do I/O or name the SDK's types (it is handed them).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, is_dataclass, replace
from types import MappingProxyType, NoneType, UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from bridge.contract import WebhookReply, value_rules
from bridge.contract.value_rules import FORMATS, compile_pattern


@dataclass(frozen=True, slots=True)
class Limit:
    """What the contract allows at one path: an integer range, a string length, a list length, a
    string's ``pattern`` and ``format`` (a grammar named by the schema: value_rules.FORMATS), or
    one of several ``alternatives`` (an ``anyOf``: quota's -1 or at least 1000)."""

    path: str
    minimum: int | None = None
    maximum: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    max_items: int | None = None
    pattern: str | None = None
    format: str | None = None
    alternatives: tuple[Limit, ...] = ()

    def refusal(self, value: Any) -> str | None:
        """Why ``value`` is outside this limit, or ``None`` if it is inside."""
        if self.alternatives:
            whys = [alt.refusal(value) for alt in self.alternatives]
            if None in whys:
                return None
            if isinstance(value, bool) or not isinstance(value, int):
                return f"must be an integer, got {type(value).__name__}"
            return f"{value} is outside {' and outside '.join(map(_span, self.alternatives))}"
        if self.minimum is not None or self.maximum is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                return f"must be an integer, got {type(value).__name__}"
            if self.minimum is not None and value < self.minimum:
                return f"{value} is below the minimum {self.minimum}"
            if self.maximum is not None and value > self.maximum:
                return f"{value} is above the maximum {self.maximum}"
        if (self.min_length is not None or self.max_length is not None
                or self.pattern is not None or self.format is not None):
            if not isinstance(value, str):
                return f"must be a string, got {type(value).__name__}"
            if self.min_length is not None and len(value) < self.min_length:
                return f"length {len(value)} is below minLength {self.min_length}"
            if self.max_length is not None and len(value) > self.max_length:
                return f"length {len(value)} is above maxLength {self.max_length}"
            if self.pattern is not None and not _pattern(self.pattern).search(value):
                return f"{value[:64]!r} does not match the pattern {self.pattern!r}"
            if self.format is not None:
                why = FORMATS[self.format](value)
                if why is not None:
                    return f"{why} (format {self.format})"
        if self.max_items is not None and len(value) > self.max_items:
            return f"{len(value)} items are above maxItems {self.max_items}"
        return None

    def fits(self, value: Any) -> bool:
        return self.refusal(value) is None

    def plain(self) -> bool:
        """Only bounds (no pattern, format or alternatives): checked inline."""
        return not (self.pattern or self.format or self.alternatives)


def _span(limit: Limit) -> str:
    if limit.minimum == limit.maximum:
        return str(limit.minimum)
    return f"[{limit.minimum}, {limit.maximum}]"


_pattern = functools.cache(compile_pattern)

_JSON_TYPES = ("string", "integer", "boolean", "number", "array", "object")
_KEYS = {"minimum": "minimum", "maximum": "maximum", "minLength": "min_length",
         "maxLength": "max_length", "maxItems": "max_items", "pattern": "pattern",
         "format": "format"}


def _limit_of(node: Mapping[str, Any], path: str) -> Limit | None:
    found = {_KEYS[k]: v for k, v in node.items() if k in _KEYS}
    if found.get("format") is not None and found["format"] not in FORMATS:
        raise TypeError(f"{path}: the contract names format {found['format']!r}, unknown here")
    return Limit(path, **found) if found else None


def _walk(node: Any, path: tuple[str, ...], defs: Mapping[str, Any], seen: frozenset[str],
          out: dict[str, Limit], types: dict[str, str], props: dict[str, frozenset[str]]) -> None:
    if not isinstance(node, dict):
        return
    ref = node.get("$ref")
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            _walk(defs[name], path, defs, seen | {name}, out, types, props)
        return
    where = "/".join(path)
    limit = _limit_of(node, where)
    if limit is not None:
        out[where] = limit
    if node.get("type") in _JSON_TYPES:  # not "null": an optional field's other branch
        types[where] = node["type"]
    if "properties" in node:
        props[where] = frozenset(node["properties"])
    if "propertyNames" in node:  # a map's keys: limited as the map's path says
        names = _limit_of(node["propertyNames"], where)
        if names is not None:
            out[f"{where}/{{key}}"] = names
    for name, sub in (node.get("properties") or {}).items():
        _walk(sub, (*path, name), defs, seen, out, types, props)
    _walk(node.get("items"), (*path, "[]"), defs, seen, out, types, props)
    _walk(node.get("additionalProperties"), (*path, "{}"), defs, seen, out, types, props)
    branches = [sub for sub in node.get("anyOf") or () if sub.get("type") != "null"]
    bounded = [b for b in branches if "$ref" not in b and _limit_of(b, where) is not None]
    if len(bounded) > 1:  # one of several ranges (quota: -1, or at least 1000)
        alternatives = tuple(limit for b in bounded if (limit := _limit_of(b, where)))
        out[where] = Limit(where, alternatives=alternatives)
        types[where] = bounded[0]["type"]
        branches = [b for b in branches if b not in bounded]
    for sub in branches:
        _walk(sub, path, defs, seen, out, types, props)
    for combined in ("oneOf", "allOf"):
        for sub in node.get(combined) or ():
            _walk(sub, path, defs, seen, out, types, props)


def _read_schema() -> tuple[Mapping[str, Limit], Mapping[str, str], Mapping[str, frozenset[str]]]:
    schema = WebhookReply.model_json_schema()
    out: dict[str, Limit] = {}
    types: dict[str, str] = {}
    props: dict[str, frozenset[str]] = {}
    _walk(schema, (), schema.get("$defs", {}), frozenset(), out, types, props)
    return MappingProxyType(out), MappingProxyType(types), MappingProxyType(props)


# Every limit of the reply contract, every value's JSON type and every object's field names,
# by reply JSON path (a map's keys: ``<map>/{key}``).
LIMITS, TYPES, _PROPERTIES = _read_schema()
_NO_FIELDS: Mapping[str, Any] = MappingProxyType({})

MAX_WARNINGS: int = LIMITS["warnings"].max_items or 0
# The lengths a warning and a reason are cut to (the schema says so in words: not a limit a
# value is refused for, so not in LIMITS).
MAX_WARNING_CHARS: int = value_rules.MAX_WARNING_CHARS
MAX_REJECT_CHARS: int = value_rules.MAX_REASON_CHARS


def read_object(value: Any, path: str) -> Mapping[str, Any]:
    """``value`` as the JSON object the reply has at ``path`` (``None``: an empty one), its
    ``null`` fields left out (unset, as the contract reads them); raises ``ValueError`` for
    another type or a field the contract has not there. For the SDK's readers of reply JSON
    (``from_json``), whose typed values then check the fields' types."""
    if value is None:
        return _NO_FIELDS
    if not isinstance(value, Mapping):
        raise ValueError(f"{path}: must be an object, got {type(value).__name__} (reply contract)")
    known = _PROPERTIES.get(path)
    if known is None:  # a map (additionalProperties): any key, values as the schema says
        return value
    for key in value:
        if key not in known:
            raise ValueError(f"{path}: {key!r} is no field of the reply contract here "
                             f"(known: {', '.join(sorted(known))})")
    if None in value.values():
        return {key: item for key, item in value.items() if item is not None}
    return value


def read_list(value: Any, path: str) -> Sequence[Any]:
    """``value`` as the reply's list at ``path`` (``None``: empty); ``ValueError`` if not one."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{path}: must be a list, got {type(value).__name__} (reply contract)")
    return value


def read_objects(value: Any, path: str) -> list[Mapping[str, Any]]:
    """``value`` as the reply's list of objects at ``path``, each read by ``read_object``."""
    return [read_object(item, f"{path}/[]") for item in read_list(value, path)]


Check = Callable[[Any], None]

_REQUEST_VALUES: ContextVar[bool] = ContextVar("request_values", default=False)


@contextmanager
def request_values() -> Iterator[None]:
    """Inside: SDK values read from a request (ValidateContainerAdjustment's merged ``adjust``
    and ``update``) are checked for their JSON types only, not for the reply's limits: another
    plugin's values are what they are, and a validating policy must see them to refuse them.
    Costs nothing on the path of a value that fits (the quick test passes first)."""
    token = _REQUEST_VALUES.set(True)
    try:
        yield
    finally:
        _REQUEST_VALUES.reset(token)

# What a JSON type is in Python (bool is no integer: JSON has no such overlap).
_IS: Mapping[str, Callable[[Any], bool]] = MappingProxyType({
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
})
_A = {"string": "a string", "integer": "an integer", "boolean": "a boolean"}
_PYTHON = {str: "string", int: "integer", bool: "boolean"}
_MAPS = frozenset({dict, MappingProxyType})


@dataclass(frozen=True, slots=True)
class Pairs:
    """A ``Mapping`` field whose JSON is a list of objects at ``path``, each holding an entry's
    key under ``key`` and its value under ``value`` (env's ``KeyValue``, hugepage limits)."""

    path: str
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class _Shape:
    """What one field (or an item of it) holds: a JSON ``value`` of ``json_type`` at ``path``
    inside ``limit``; an ``array`` or ``map`` of ``item`` (a map's keys: ``key``); or an
    ``instance`` of one of the SDK's ``classes`` (which checks itself when built)."""

    kind: str
    path: str = ""
    json_type: str = ""
    limit: Limit | None = None
    item: _Shape | None = None
    key: _Shape | None = None
    classes: tuple[type, ...] = ()
    optional: bool = False

    def refusal(self, value: Any) -> tuple[str, str, str] | None:
        """``(where inside the value, why, contract path)`` if ``value`` does not fit: the first
        value of the wrong type, else the first outside its limit."""
        return self._refusal(value, True) or self._refusal(value, False)

    def _refusal(self, value: Any, types_only: bool) -> tuple[str, str, str] | None:
        if value is None and self.optional:
            return None
        got = type(value).__name__
        if self.kind == "value":
            if not _IS[self.json_type](value):
                return "", f"must be {_A[self.json_type]}, got {got}", self.path
            if types_only or self.limit is None or _REQUEST_VALUES.get():
                return None
            why = self.limit.refusal(value)
            return ("", why, self.path) if why is not None else None
        if self.kind == "instance":
            if isinstance(value, self.classes):
                return None
            names = " or ".join(c.__name__ for c in self.classes)
            return "", f"must be a {names}, got {got}", ""
        assert self.item is not None
        if self.kind == "array":
            if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)):
                return "", f"must be a tuple, got {got}", self.path
            why = self.limit.refusal(value) if self.limit is not None and not types_only else None
            if why is not None:
                return "", why, self.path
            entries: Iterable[tuple[Any, Any]] = enumerate(value)
        else:
            if not isinstance(value, Mapping):
                return "", f"must be a mapping, got {got}", self.path
            entries = value.items()
            assert self.key is not None
            for key in value:
                if (found := self.key._refusal(key, types_only)) is not None:
                    return f"[{key!r}]", f"the key {found[1]}", found[2]
        for at, item in entries:
            if (found := self.item._refusal(item, types_only)) is not None:
                return f"[{at!r}]{found[0]}", found[1], found[2]
        return None

    def plain_string(self) -> bool:
        """A string with no limit: checked a whole list at a time (``all(map(...))``)."""
        return self.kind == "value" and self.json_type == "string" and self.limit is None

    def quick(self, v: str, env: dict[str, Any], depth: int = 0) -> str:
        """A Python expression true for a value ``v`` surely of this shape (the exact classes;
        anything else goes to ``refusal``, which decides)."""
        x, k = f"x{depth}", f"k{depth}"
        if self.kind == "value":
            test = _quick(v, self.json_type, self.limit, env)
        elif self.kind == "instance":
            name = f"C{len(env)}"
            env[name] = frozenset(self.classes)
            test = f"{v}.__class__ in {name}"
        elif self.kind == "array":
            assert self.item is not None
            bound = f" and len({v}) <= {self.limit.max_items}" if self.limit else ""
            items = (f"all(map(_IS_STR, {v}))" if self.item.plain_string() else
                     f"all({self.item.quick(x, env, depth + 1)} for {x} in {v})")
            test = f"{v}.__class__ is tuple{bound} and (not {v} or {items})"
        else:
            assert self.item is not None and self.key is not None
            if self.key.plain_string() and self.item.plain_string():  # most maps: no loop
                items = f"all(map(_IS_STR, {v})) and all(map(_IS_STR, {v}.values()))"
            else:
                items = (f"all({self.key.quick(k, env, depth + 1)} and "
                         f"{self.item.quick(x, env, depth + 1)} for {k}, {x} in {v}.items())")
            test = f"{v}.__class__ in _MAPS and (not {v} or {items})"
        return f"({v} is None or {test})" if self.optional else test


def _quick(v: str, json_type: str, limit: Limit | None, env: dict[str, Any]) -> str:
    test = f"{v}.__class__ is {_PYTHON_NAMES[json_type]}"
    if limit is None:
        return test
    if limit.alternatives:  # any one range: -1, or at least 1000
        spans = " or ".join(f"{alt.minimum} <= {v} <= {alt.maximum}" for alt in limit.alternatives)
        return f"{test} and ({spans})"
    parts = [test]
    if limit.minimum is not None or limit.maximum is not None:
        parts.append(f"{limit.minimum} <= {v} <= {limit.maximum}")
    if limit.min_length is not None or limit.max_length is not None:
        top = limit.max_length if limit.max_length is not None else f"len({v})"
        parts.append(f"{limit.min_length or 0} <= len({v}) <= {top}")
    if limit.pattern is not None:  # the compiled pattern's search, a C call
        name = f"P{len(env)}"
        env[name] = _pattern(limit.pattern).search
        parts.append(f"{name}({v}) is not None")
    if limit.format is not None:
        name = f"F{len(env)}"
        env[name] = FORMATS[limit.format]
        parts.append(f"{name}({v}) is None")
    return " and ".join(parts)


_PYTHON_NAMES = {json_type: cls.__name__ for cls, json_type in _PYTHON.items()}


def _value(owner: str, path: str, hint: Any) -> _Shape:
    json_type = TYPES.get(path)
    if json_type not in _A or _PYTHON.get(hint) != json_type:
        raise TypeError(f"{owner}: the contract has {json_type} at {path}, the SDK {hint}")
    return _Shape("value", path, json_type, LIMITS.get(path))


def _shape(owner: str, hint: Any, spec: str | Pairs | None) -> _Shape:
    """The shape of a field typed ``hint`` whose value goes to ``spec`` in the reply."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, UnionType) and NoneType in args:
        rest = tuple(a for a in args if a is not NoneType)
        inner = _shape(owner, rest[0] if len(rest) == 1 else Union[rest], spec)  # noqa: UP007
        return replace(inner, optional=True)
    if isinstance(spec, Pairs):  # a Mapping written as a list of key/value objects
        return _Shape("map", spec.path, item=_value(owner, f"{spec.path}/[]/{spec.value}", args[1]),
                      key=_value(owner, f"{spec.path}/[]/{spec.key}", args[0]))
    if origin is tuple:
        element = args[0]
        if spec is None or TYPES.get(spec) != "array":  # items only (a list the contract
            return _Shape("array", spec or "", item=_shape(owner, element, spec))  # has not)
        return _Shape("array", spec, limit=LIMITS.get(spec),
                      item=_shape(owner, element, f"{spec}/[]" if element in _PYTHON else None))
    if origin is Mapping and spec is not None:
        # JSON object keys are strings; the values are the schema's additionalProperties.
        return _Shape("map", spec, item=_value(owner, f"{spec}/{{}}", args[1]),
                      key=_Shape("value", spec, "string", LIMITS.get(f"{spec}/{{key}}")))
    if spec is not None:
        return _value(owner, spec, hint)
    classes = args if origin in (Union, UnionType) else (hint,)
    if not all(isinstance(c, type) and c not in _PYTHON and c is not object for c in classes):
        raise TypeError(f"{owner}: {hint} goes nowhere in the reply contract (give its path)")
    return _Shape("instance", classes=classes)


def shapes(cls: type, paths: Mapping[str, str | Pairs],
           elsewhere: Iterable[str] = ()) -> dict[str, _Shape]:
    """Every field of ``cls`` (a dataclass or named tuple) but ``elsewhere``, as checked: its
    Python type (``get_type_hints``) says whether it may be ``None``, holds a tuple, a mapping or
    an SDK value; the reply JSON path in ``paths`` gives the contract's JSON type and limits."""
    hints = get_type_hints(cls)
    names = [f.name for f in fields(cls)] if is_dataclass(cls) else list(cls._fields)  # type: ignore[attr-defined]
    unknown = set(paths) - set(names)
    if unknown:
        raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)}")
    skip = set(elsewhere)
    return {name: _shape(f"{cls.__name__}.{name}", hints[name], paths.get(name))
            for name in names if name not in skip}


def checks(cls: type, paths: Mapping[str, str | Pairs], elsewhere: Iterable[str] = ()) -> Check:
    """The check of a type's fields (``shapes``; ``elsewhere``: fields checked by other means):
    a function that raises ``ValueError`` for the first field of the wrong type or outside its
    limit, naming it (``Adjustment.env['A']: must be a string, got int (reply contract:
    adjust/env/[]/value)``).

    Built as source once per type (a class test and a comparison per field, no call while the
    values fit: the hot path builds these per event); a value the quick test does not pass (of
    the wrong type, outside, or a subclass such as an ``IntEnum``) goes to ``_Shape.refusal``,
    which decides."""
    owner = cls.__name__
    lines = ["def check(obj):"]
    env: dict[str, Any] = {"_refuse": _refuse, "_MAPS": _MAPS, "_IS_STR": str.__instancecheck__}
    for attr, shape in shapes(cls, paths, elsewhere).items():
        name = f"S_{attr}"
        env[name] = shape
        lines.append(f"    v = obj.{attr}")
        lines.append(f"    if not ({shape.quick('v', env)}):")
        lines.append(f"        _refuse({owner + '.' + attr!r}, v, {name})")
    if len(lines) == 1:
        lines.append("    pass")
    exec("\n".join(lines), env)  # source made above from the schema's types and numbers only
    check: Check = env["check"]
    return check


def _refuse(name: str, value: Any, shape: _Shape) -> None:
    found = shape.refusal(value)
    if found is not None:
        where, why, path = found
        raise ValueError(f"{name}{where}: {why}" + (f" (reply contract: {path})" if path else ""))


def fit_warnings(warnings: tuple[str, ...]) -> tuple[str, ...]:
    """``warnings`` cut to the contract's ``maxItems``, the last kept one saying how many went,
    and each to the contract's length, ending in ``...`` when cut (the bridge would cut it
    without a mark)."""
    if any(len(w) > MAX_WARNING_CHARS for w in warnings):
        warnings = tuple(w if len(w) <= MAX_WARNING_CHARS else w[: MAX_WARNING_CHARS - 3] + "..."
                         for w in warnings)
    if len(warnings) <= MAX_WARNINGS:
        return warnings
    dropped = len(warnings) - MAX_WARNINGS + 1
    return (*warnings[: MAX_WARNINGS - 1], f"... and {dropped} more warnings")


def fit_reject(reason: str | None) -> str | None:
    """A reject reason cut to the contract's ``maxLength``, ending in ``...`` when cut."""
    if reason is None or len(reason) <= MAX_REJECT_CHARS:
        return reason
    return reason[: MAX_REJECT_CHARS - 3] + "..."
