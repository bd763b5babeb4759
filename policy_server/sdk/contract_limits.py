"""The reply contract's value limits, read off its JSON Schema, and the check the SDK runs on them.

Owns ``LIMITS`` (reply JSON path -> ``Limit``: ``"update/[]/container_id"``, ``"warnings"``,
``"adjust/rlimits/[]/soft"``; ``[]`` is a list's item), walked once from
``bridge.contract.WebhookReply``'s JSON Schema (``minimum``/``maximum``, ``minLength``/
``maxLength``, ``maxItems``), so no number is restated here; ``checks``, which makes the
check the SDK's value types run when built (a value outside the contract raises ``ValueError``
naming the field and the limit); and ``fit_warnings`` / ``fit_reject``, which shorten what the
framework composes from valid parts (merged warnings and reasons) to fit, with a note. Must not do
I/O or know the SDK's types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from bridge.contract import WebhookReply


@dataclass(frozen=True, slots=True)
class Limit:
    """What the contract allows at one path: an integer range, a string length, a list length."""

    path: str
    minimum: int | None = None
    maximum: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    max_items: int | None = None

    def refusal(self, value: Any) -> str | None:
        """Why ``value`` is outside this limit, or ``None`` if it is inside."""
        if self.minimum is not None or self.maximum is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                return f"must be an integer, got {type(value).__name__}"
            if self.minimum is not None and value < self.minimum:
                return f"{value} is below the minimum {self.minimum}"
            if self.maximum is not None and value > self.maximum:
                return f"{value} is above the maximum {self.maximum}"
        if self.min_length is not None or self.max_length is not None:
            if not isinstance(value, str):
                return f"must be a string, got {type(value).__name__}"
            if self.min_length is not None and len(value) < self.min_length:
                return f"length {len(value)} is below minLength {self.min_length}"
            if self.max_length is not None and len(value) > self.max_length:
                return f"length {len(value)} is above maxLength {self.max_length}"
        if self.max_items is not None and len(value) > self.max_items:
            return f"{len(value)} items are above maxItems {self.max_items}"
        return None


_KEYS = {"minimum": "minimum", "maximum": "maximum", "minLength": "min_length",
         "maxLength": "max_length", "maxItems": "max_items"}


def _walk(node: Any, path: tuple[str, ...], defs: Mapping[str, Any], seen: frozenset[str],
          out: dict[str, Limit]) -> None:
    if not isinstance(node, dict):
        return
    ref = node.get("$ref")
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            _walk(defs[name], path, defs, seen | {name}, out)
        return
    found = {_KEYS[k]: v for k, v in node.items() if k in _KEYS}
    if found:
        out["/".join(path)] = Limit("/".join(path), **found)
    for name, sub in (node.get("properties") or {}).items():
        _walk(sub, (*path, name), defs, seen, out)
    _walk(node.get("items"), (*path, "[]"), defs, seen, out)
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(key) or ():
            _walk(sub, path, defs, seen, out)


def _read_limits() -> Mapping[str, Limit]:
    schema = WebhookReply.model_json_schema()
    out: dict[str, Limit] = {}
    _walk(schema, (), schema.get("$defs", {}), frozenset(), out)
    return MappingProxyType(out)


# Every limit of the reply contract, by reply JSON path.
LIMITS: Mapping[str, Limit] = _read_limits()

MAX_WARNINGS: int = LIMITS["warnings"].max_items or 0
MAX_REJECT_CHARS: int = LIMITS["reject/reason"].max_length or 0

Check = Callable[[Any], None]


def checks(owner: str, paths: Mapping[str, str]) -> Check:
    """The check for a type's fields (attribute -> the reply path its value goes to): a function
    that raises ``ValueError`` for the first field outside its limit (``None``: unset).

    Built as source once per type (one comparison per field, no loop, no call while the values
    are inside: the hot path builds these per event); a value the quick test does not pass
    (outside, or a type such as an ``int`` subclass) goes to ``Limit.refusal``, which decides."""
    lines = ["def check(obj):"]
    env: dict[str, Any] = {"_refuse": _refuse}
    for i, (attr, path) in enumerate(paths.items()):
        limit = LIMITS[path]
        env[f"L{i}"] = limit
        lines.append(f"    v = obj.{attr}")
        lines.append(f"    if v is not None and not ({_quick(limit)}):")
        lines.append(f"        _refuse({owner + '.' + attr!r}, v, L{i})")
    if len(lines) == 1:
        lines.append("    pass")
    exec("\n".join(lines), env)  # source made above from the schema's numbers only
    check: Check = env["check"]
    return check


def _quick(limit: Limit) -> str:
    """A Python expression true for a value ``v`` surely inside ``limit``."""
    if limit.minimum is not None or limit.maximum is not None:
        return f"v.__class__ is int and {limit.minimum} <= v <= {limit.maximum}"
    if limit.min_length is not None or limit.max_length is not None:
        return (f"v.__class__ is str and {limit.min_length or 0} <= len(v) "
                f"<= {limit.max_length if limit.max_length is not None else 'len(v)'}")
    return f"len(v) <= {limit.max_items}"


def _refuse(name: str, value: Any, limit: Limit) -> None:
    why = limit.refusal(value)
    if why is not None:
        raise ValueError(f"{name}: {why} (reply contract: {limit.path})")


def check_items(name: str, values: Iterable[Any], limit: Limit) -> None:
    """Raise ``ValueError`` for the first of ``values`` outside ``limit``."""
    for item in values:
        _refuse(name, item, limit)


def fit_warnings(warnings: tuple[str, ...]) -> tuple[str, ...]:
    """``warnings`` cut to the contract's ``maxItems``, the last kept one saying how many went."""
    if len(warnings) <= MAX_WARNINGS:
        return warnings
    dropped = len(warnings) - MAX_WARNINGS + 1
    return (*warnings[: MAX_WARNINGS - 1], f"... and {dropped} more warnings")


def fit_reject(reason: str | None) -> str | None:
    """A reject reason cut to the contract's ``maxLength``, ending in ``...`` when cut."""
    if reason is None or len(reason) <= MAX_REJECT_CHARS:
        return reason
    return reason[: MAX_REJECT_CHARS - 3] + "..."
