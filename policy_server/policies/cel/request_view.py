"""The part of a request the NodePolicies read, decoded straight from the body.

Owns ``RequestView``: built at load from the ``references.Path``s every policy in force on an
event reads, it decodes a request body into the JSON maps the expressions are bound to, keeping
only those paths (a ``has()`` keeps the key; a path read whole keeps everything under it). cel-cpp
converts every bound map into CEL values before the first read, so what is left out costs
neither the decode nor the conversion; an expression sees the same values and the same absences
as with the whole request, because every field it can reach is kept. The decode is msgspec's, to
``TypedDict``s made from the paths (unknown keys skipped without being built); a body whose
shape they do not fit (a ``dyn`` field holding a list where a path expects a map) is decoded
whole with orjson instead. ``None`` for the paths reads everything. Top-level nulls are left
out (an absent variable). Must not evaluate.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import msgspec
import orjson

from policy_server.policies.cel.references import Path

_names = itertools.count()


@dataclass(slots=True)
class _Node:
    children: dict[str, _Node] = field(default_factory=dict)
    whole: bool = False


def _tree(paths: Iterable[Path]) -> _Node:
    root = _Node()
    for path in paths:
        node = root
        for step in path.steps:
            node = node.children.setdefault(step, _Node())
        node.whole = node.whole or not path.presence
    return root


def _type(node: _Node) -> Any:
    if node.whole or not node.children:  # read whole, or has() only: keep as it is
        return Any
    fields = {key: _type(child) for key, child in node.children.items()}
    shape = TypedDict(f"CelView{next(_names)}", fields, total=False)  # type: ignore[misc]
    return shape | None


class RequestView:
    """Decodes the bodies of one event for one set of policies."""

    def __init__(self, paths: Iterable[Path] | None) -> None:
        self._decode: Callable[[bytes], Any] = orjson.loads
        if paths is not None:
            fields = {key: _type(child) for key, child in _tree(paths).children.items()}
            shape = TypedDict(f"CelView{next(_names)}", fields, total=False)  # type: ignore[misc]
            self._decode = msgspec.json.Decoder(shape).decode

    def decode(self, body: bytes) -> dict[str, Any]:
        """The request's read part (the whole request without paths); ``{}`` for no body."""
        if not body:
            return {}
        data: dict[str, Any]
        try:
            data = self._decode(body)
        except msgspec.DecodeError:  # a shape the paths did not expect
            data = orjson.loads(body)
        if None in data.values():  # rare: the copy is paid only then
            return {k: v for k, v in data.items() if v is not None}
        return data
