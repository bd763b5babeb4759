"""What of the request an expression can read: its field paths, from the compiled AST.

Owns ``paths(program, roots)`` (and the tree walk ``cost`` shares: ``tree``, ``chain``,
``children``): the paths (``('container', 'linux', 'resources')``) through the
request variables ``roots`` that a compiled cel-expr-python ``Expression`` reads, found by
walking the expression tree it serializes (a ``google.protobuf.Any`` holding a
``cel.expr.CheckedExpr`` or ``ParsedExpr``). A chain of field selections, optional selections
(``.?f``) and indexes by a string literal (``m['k']``, ``m[?'k']``) from a root is one path; a
``has(a.b.c)`` is a ``Path`` with ``presence``. Whatever else uses a value (a comprehension over
it, a function, a comparison) reads it whole, so the path stops there. The analysis may only err
on the side of reading more: an identifier named like a root but bound locally
(``cel.bind(pod, ...)``) still counts as the root, and a tree it cannot read makes every root
read whole (``None``). The wire description below is ours: the field numbers of cel-spec's
``cel/expr/syntax.proto`` and ``checked.proto`` that the walk needs, nothing more. Must not
evaluate.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "nriwebhook.celast"
# message -> (field, number, type or message, repeated); cel.expr's numbers.
_MESSAGES: dict[str, tuple[tuple[str, int, str, bool], ...]] = {
    "Constant": (("null_value", 1, "int32", False), ("bool_value", 2, "bool", False),
                 ("int64_value", 3, "int64", False), ("uint64_value", 4, "uint64", False),
                 ("double_value", 5, "double", False), ("string_value", 6, "string", False),
                 ("bytes_value", 7, "bytes", False)),
    "Ident": (("name", 1, "string", False),),
    "Select": (("operand", 1, "Expr", False), ("field", 2, "string", False),
               ("test_only", 3, "bool", False)),
    "Call": (("target", 1, "Expr", False), ("function", 2, "string", False),
             ("args", 3, "Expr", True)),
    "CreateList": (("elements", 1, "Expr", True),),
    "Entry": (("map_key", 3, "Expr", False), ("value", 4, "Expr", False)),
    "CreateStruct": (("entries", 2, "Entry", True),),
    "Comprehension": (("iter_range", 2, "Expr", False), ("accu_init", 4, "Expr", False),
                      ("loop_condition", 5, "Expr", False), ("loop_step", 6, "Expr", False),
                      ("result", 7, "Expr", False)),
    "Expr": (("const_expr", 3, "Constant", False), ("ident_expr", 4, "Ident", False),
             ("select_expr", 5, "Select", False), ("call_expr", 6, "Call", False),
             ("list_expr", 7, "CreateList", False), ("struct_expr", 8, "CreateStruct", False),
             ("comprehension_expr", 9, "Comprehension", False)),
    "CheckedExpr": (("expr", 4, "Expr", False),),
    "ParsedExpr": (("expr", 2, "Expr", False),),
}
_ONEOF = {"Expr": "expr_kind", "Constant": "constant_kind"}
_SCALAR = {"string": _F.TYPE_STRING, "bool": _F.TYPE_BOOL, "int32": _F.TYPE_INT32,
           "int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64, "double": _F.TYPE_DOUBLE,
           "bytes": _F.TYPE_BYTES}
# Calls that step into a value by a literal key, as a field selection does.
_KEYED = frozenset({"_[_]", "_[?_]", "_?._"})


@dataclass(frozen=True, slots=True)
class Path:
    steps: tuple[str, ...]  # root first
    presence: bool = False  # has(...): only that the last step is there


@functools.cache
def _classes() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(name="nriwebhook_celast.proto", package=_PACKAGE,
                                              syntax="proto3")
    for name, fields in _MESSAGES.items():
        msg = file.message_type.add(name=name)
        if name in _ONEOF:  # all its fields are one oneof
            msg.oneof_decl.add(name=_ONEOF[name])
        for field, number, kind, repeated in fields:
            label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            if kind in _SCALAR:
                added = msg.field.add(name=field, number=number, label=label, type=_SCALAR[kind])
            else:
                added = msg.field.add(name=field, number=number, label=label,
                                      type=_F.TYPE_MESSAGE, type_name=f".{_PACKAGE}.{kind}")
            if name in _ONEOF:
                added.oneof_index = 0
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
            for name in ("CheckedExpr", "ParsedExpr")}


def tree(program: Any) -> Any:
    """``program``'s expression tree (raises ``ValueError`` or ``DecodeError``)."""
    wrapped = any_pb2.Any.FromString(program.serialize())
    kind = wrapped.type_url.rsplit(".", 1)[-1]
    if kind not in ("CheckedExpr", "ParsedExpr"):
        raise ValueError(kind)
    return _classes()[kind].FromString(wrapped.value).expr


def chain(expr: Any, roots: frozenset[str]) -> tuple[str, ...] | None:
    """The steps of ``expr`` if it is a root followed by keyed steps only."""
    kind = expr.WhichOneof("expr_kind")
    if kind == "ident_expr":
        return (expr.ident_expr.name,) if expr.ident_expr.name in roots else None
    if kind == "select_expr" and not expr.select_expr.test_only:
        head = chain(expr.select_expr.operand, roots)
        return None if head is None else (*head, expr.select_expr.field)
    if kind == "call_expr" and expr.call_expr.function in _KEYED and len(expr.call_expr.args) == 2:
        key = expr.call_expr.args[1]
        if key.WhichOneof("expr_kind") == "const_expr" and \
                key.const_expr.HasField("string_value"):
            head = chain(expr.call_expr.args[0], roots)
            return None if head is None else (*head, key.const_expr.string_value)
    return None


def _walk(expr: Any, roots: frozenset[str]) -> Iterator[Path]:
    steps = chain(expr, roots)
    if steps is not None:
        yield Path(steps)
        return
    kind = expr.WhichOneof("expr_kind")
    if kind == "select_expr" and expr.select_expr.test_only:
        head = chain(expr.select_expr.operand, roots)
        if head is not None:
            yield Path((*head, expr.select_expr.field), presence=True)
            return
    for child in children(expr):
        yield from _walk(child, roots)


def children(expr: Any) -> Iterator[Any]:
    kind = expr.WhichOneof("expr_kind")
    if kind is None or kind in ("const_expr", "ident_expr"):
        return
    node = getattr(expr, kind)
    if kind == "struct_expr":
        for entry in node.entries:
            if entry.HasField("map_key"):
                yield entry.map_key
            yield entry.value
        return
    for field, value in node.ListFields():
        if field.message_type is not None and field.message_type.name == "Expr":
            yield from (value if field.is_repeated else (value,))


def paths(program: Any, roots: frozenset[str]) -> frozenset[Path] | None:
    """The request paths ``program`` reads; None when its tree cannot be read (read all)."""
    try:
        return frozenset(_walk(tree(program), roots))
    except (DecodeError, ValueError, RecursionError):
        return None
