"""The Kubernetes CEL libraries a node policy needs, on top of cel-cpp's standard ones.

Owns the functions added to every ``cel`` policy's environment, named as in Kubernetes
(k8s.io/apiserver/pkg/cel/library): ``quantity(string) -> int`` (the value in base units,
rounded up, as ``quantity(s).asInteger()``), ``isQuantity(string)``, the regex library
(``s.find(re)``, ``s.findAll(re)``, ``s.findAll(re, n)``) and the lists library on ints
(``l.sum()``, ``l.min()``, ``l.max()``, ``l.isSorted()``, ``l.indexOf(x)``,
``l.lastIndexOf(x)``), plus the cel-cpp extensions Kubernetes also enables (strings, optional,
bindings, math). What is missing is listed in docs/policies/cel.md. A function given a bad value
raises ``ValueError``: an evaluation error, handled by the policy's ``failurePolicy``. Must not
do I/O.
"""

from __future__ import annotations

import re
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_math, ext_optional, ext_strings

from policy_server import quantity_value

_T = cel.Type


def _quantity(text: str) -> int:
    try:
        return quantity_value(text)
    except ValueError as exc:
        raise ValueError(f"quantity({text!r}): {exc}") from None


def _is_quantity(text: str) -> bool:
    try:
        quantity_value(text)
    except ValueError:
        return False
    return True


def _find(text: str, pattern: str) -> str:
    found = re.search(pattern, text)
    return found.group(0) if found else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in re.finditer(pattern, text)]
    return found if limit < 0 else found[:limit]


def _index_of(items: list[Any], value: Any) -> int:
    return items.index(value) if value in items else -1


def _last_index_of(items: list[Any], value: Any) -> int:
    return len(items) - 1 - items[::-1].index(value) if value in items else -1


def _non_empty(name: str, items: list[int]) -> list[int]:
    if not items:
        raise ValueError(f"{name}() of an empty list")
    return items


def _overload(oid: str, result: Any, params: list[Any], impl: Any, member: bool) -> Any:
    return cel.Overload(oid, result, params, is_member=member, impl=impl)


def _k8s() -> Any:
    ints = _T.List(_T.INT)
    strings = _T.List(_T.STRING)
    decls = [
        ("quantity", [_overload("quantity_string", _T.INT, [_T.STRING], _quantity, False)]),
        ("isQuantity", [_overload("is_quantity_string", _T.BOOL, [_T.STRING], _is_quantity,
                                  False)]),
        ("find", [_overload("string_find_string", _T.STRING, [_T.STRING, _T.STRING], _find,
                            True)]),
        ("findAll", [
            _overload("string_find_all_string", strings, [_T.STRING, _T.STRING], _find_all, True),
            _overload("string_find_all_string_int", strings, [_T.STRING, _T.STRING, _T.INT],
                      _find_all, True),
        ]),
        ("sum", [_overload("list_int_sum", _T.INT, [ints], sum, True)]),
        ("min", [_overload("list_int_min", _T.INT, [ints],
                           lambda items: min(_non_empty("min", items)), True)]),
        ("max", [_overload("list_int_max", _T.INT, [ints],
                           lambda items: max(_non_empty("max", items)), True)]),
        ("isSorted", [_overload("list_int_is_sorted", _T.BOOL, [ints],
                                lambda items: items == sorted(items), True)]),
        ("indexOf", [_overload("list_int_index_of", _T.INT, [ints, _T.INT], _index_of, True),
                     _overload("list_string_index_of", _T.INT, [strings, _T.STRING], _index_of,
                               True)]),
        ("lastIndexOf", [
            _overload("list_int_last_index_of", _T.INT, [ints, _T.INT], _last_index_of, True),
            _overload("list_string_last_index_of", _T.INT, [strings, _T.STRING],
                      _last_index_of, True),
        ]),
    ]
    return cel.CelExtension("kubernetes", [cel.FunctionDecl(n, o) for n, o in decls])


def extensions() -> list[Any]:
    """Every library of a ``cel`` policy's environment (a fresh list: the binding keeps it)."""
    return [ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_bindings.ExtBindings(),
            ext_math.ExtMath(), _k8s()]
