"""The static cost limit of an expression, as the API server estimates one at load.

Owns ``estimate(program, params)``: the most comprehension iterations (``all``, ``exists``,
``map``, ``filter``, ...) one evaluation of ``program`` can take, from its tree
(``references.tree``). A comprehension costs the size of its range times one plus the
iterations of its body, plus its parts. A range's size is known at load when it is a list or map
literal or a path into ``params`` (the params in force; a reload recompiles); anything else (a
list from the request, a variable, a function's result) counts as ``REQUEST_LIST_ITEMS``, as
the API server sizes a list whose schema has no ``maxItems`` from the largest request.
``MAX_ESTIMATED_ITERATIONS`` is the limit the compiler enforces: one comprehension over a
request list passes, two nested ones over request lists do not. At run time cel-cpp stops
any evaluation after ``RUNTIME_ITERATION_BUDGET`` iterations (fixed in cel-expr-python 0.1),
an evaluation error that follows ``failurePolicy``. Must not evaluate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.message import DecodeError

from policy_server.policies.cel.references import chain, children, tree

REQUEST_LIST_ITEMS = 1_000
MAX_ESTIMATED_ITERATIONS = 1_000_000
RUNTIME_ITERATION_BUDGET = 10_000
_PARAMS = frozenset({"params"})


def _size(expr: Any, params: Any) -> int:
    kind = expr.WhichOneof("expr_kind")
    if kind == "list_expr":
        return len(expr.list_expr.elements)
    if kind == "struct_expr":
        return len(expr.struct_expr.entries)
    steps = chain(expr, _PARAMS)
    if steps is not None:
        value = params
        for step in steps[1:]:
            if not isinstance(value, Mapping) or step not in value:
                return 0  # no such key: the evaluation fails before iterating
            value = value[step]
        return len(value) if isinstance(value, list | Mapping) else 1
    return REQUEST_LIST_ITEMS


def _iterations(expr: Any, params: Any) -> int:
    if expr.WhichOneof("expr_kind") != "comprehension_expr":
        return sum(_iterations(child, params) for child in children(expr))
    loop = expr.comprehension_expr
    body = _iterations(loop.loop_condition, params) + _iterations(loop.loop_step, params)
    return (_iterations(loop.iter_range, params) + _iterations(loop.accu_init, params)
            + _size(loop.iter_range, params) * (1 + body) + _iterations(loop.result, params))


def estimate(program: Any, params: Any) -> int | None:
    """The most iterations one evaluation of ``program`` takes; None if its tree is unreadable
    (the runtime budget still applies)."""
    try:
        return _iterations(tree(program), params)
    except (DecodeError, ValueError, RecursionError):
        return None
