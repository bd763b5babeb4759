"""One program per NodePolicy: every expression of a request in a single evaluation.

Owns ``source(...)``, the CEL text that runs a policy's whole order of work at once (match
conditions, then ``variables`` bound with ``cel.bind``, validations with their
``messageExpression``s, audit annotations, mutations) and returns every value, and
``run(program, data)``, its result as a ``ProgramResult``. cel-cpp pays a conversion of the
bound data and a call per evaluation; one evaluation pays them once. The program is only a
faster way to the same answer: any error, any value of an unexpected type, or a variable that is
not data gives ``None``, and the caller takes the exact path (``program``), expression by
expression, which decides what the error means (a variable's error matters only to an expression
that reads it; the iteration budget is per expression there). Must not decide anything itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

_ERROR = cel.Type.ERROR
# Local names of the program; a user's expression cannot read them (they are not declared in
# the checking environment), so they shadow nothing it uses.
_CONDS = "nri_policy_conditions"
_COND = "nri_policy_condition"


@dataclass(frozen=True, slots=True)
class ProgramResult:
    applies: bool
    # Per validation: None if it held, else its messageExpression's value (a list of one) or
    # [] when it has none.
    failures: tuple[list[Any] | None, ...] = ()
    audit: tuple[Any, ...] = ()
    mutations: tuple[Any, ...] = ()


def _wrap(expression: str) -> str:
    # Newlines: a '//' comment in the expression ends at its own line.
    return f"(\n{expression}\n)"


def source(conditions: Sequence[str], variables: Sequence[tuple[str, str]],
           validations: Sequence[tuple[str, str | None]], audit: Sequence[str],
           mutations: Sequence[str]) -> str:
    """The policy as one expression: ``[conditions]`` if one is false, else ``[conditions,
    [variables, [validation...], [audit...], [mutation...]]]``."""
    checks = []
    for expression, message in validations:
        checks.append(_wrap(expression) if message is None else
                      f"({_wrap(expression)} ? true : [{_wrap(message)}])")
    body = (f"[variables, [{', '.join(checks)}], [{', '.join(map(_wrap, audit))}], "
            f"[{', '.join(map(_wrap, mutations))}]]")
    for i in range(len(variables) - 1, -1, -1):  # the first variable's binding outermost
        earlier = ", ".join(f"'{n}': variables.{n}" for n, _ in variables[:i])
        entry = f"'{variables[i][0]}': {_wrap(variables[i][1])}"
        body = f"cel.bind(variables, {{{', '.join(filter(None, (earlier, entry)))}}}, {body})"
    listed = ", ".join(map(_wrap, conditions))
    return (f"cel.bind({_CONDS}, [{listed}], {_CONDS}.all({_COND}, {_COND}) ? "
            f"[{_CONDS}, {body}] : [{_CONDS}])")


def run(program: Any, data: dict[str, Any], plain: Sequence[bool]) -> ProgramResult | None:
    """The program's values on ``data``; None: take the exact path. ``plain[i]``: validation i
    has no messageExpression (its value must be a bool)."""
    try:
        value = program.eval(data=data)
        if value.type() == _ERROR:
            return None
        result = value.plain_value()
    except (RuntimeError, ValueError, TypeError):
        return None
    if len(result) == 1:
        return ProgramResult(applies=False)
    _variables, checks, audit, mutations = result[1]
    failures: list[list[Any] | None] = []
    for check, has_no_message in zip(checks, plain, strict=True):
        if check is True:
            failures.append(None)
        elif has_no_message and check is False:
            failures.append([])
        elif not has_no_message and isinstance(check, list):
            failures.append(check)
        else:
            return None
    return ProgramResult(True, tuple(failures), tuple(audit), tuple(mutations))
