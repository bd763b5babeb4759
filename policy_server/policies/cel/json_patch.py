"""RFC 6902 JSON Patch on a plain JSON value: the second kind of ``cel`` mutation.

Owns ``apply(doc, operations)``: ``add``, ``remove``, ``replace``, ``move``, ``copy``, ``test``
with RFC 6901 pointers (``~0``, ``~1``, ``-`` for the end of a list). One deviation, said in
docs/policies/cel.md: ``add`` creates missing parent objects, because the patch applies to the
adjustment the policy builds (it starts empty), not to an existing object as in a
MutatingAdmissionPolicy. A bad operation raises ``ValueError`` (an evaluation error). Must not
know what the document means.
"""

from __future__ import annotations

import copy
from typing import Any


def _tokens(pointer: object) -> list[str]:
    if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
        raise ValueError(f"JSON Patch: bad path {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _parent(doc: Any, tokens: list[str], create: bool) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, list):
            node = node[int(token)]
        elif isinstance(node, dict):
            if token not in node:
                if not create:
                    raise ValueError(f"JSON Patch: no {token!r} on the path")
                node[token] = {}
            node = node[token]
        else:
            raise ValueError(f"JSON Patch: {token!r} is below a scalar")
    return node


def _get(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens:
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens, create=True)
    last = tokens[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), value)
    else:
        parent[last] = value
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    parent = _parent(doc, tokens, create=False)
    last = tokens[-1]
    removed = parent.pop(int(last) if isinstance(parent, list) else last)
    return removed


def apply(doc: Any, operations: object) -> Any:
    """``doc`` (not changed) with ``operations`` applied."""
    if not isinstance(operations, list):
        raise ValueError("JSON Patch: expected a list of operations")
    out = copy.deepcopy(doc)
    for i, op in enumerate(operations):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ValueError(f"JSON Patch: operation {i}: needs op and path")
        tokens = _tokens(op["path"])
        try:
            match op["op"]:
                case "add":
                    out = _add(out, tokens, copy.deepcopy(op["value"]))
                case "remove":
                    _remove(out, tokens)
                case "replace":
                    _remove(out, tokens)
                    out = _add(out, tokens, copy.deepcopy(op["value"]))
                case "move":
                    value = _remove(out, _tokens(op["from"]))
                    out = _add(out, tokens, value)
                case "copy":
                    out = _add(out, tokens, copy.deepcopy(_get(out, _tokens(op["from"]))))
                case "test":
                    if _get(out, tokens) != op["value"]:
                        raise ValueError(f"JSON Patch: operation {i}: test failed at {op['path']}")
                case other:
                    raise ValueError(f"JSON Patch: operation {i}: unknown op {other!r}")
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(f"JSON Patch: operation {i} ({op['op']} {op['path']}): "
                             f"no such location ({exc})") from None
    return out
