"""One program per NodePolicy: every expression of a request in a single evaluation.

Owns ``source(...)``, the CEL text that runs a policy's whole order of work at once (match
conditions, then ``variables`` bound with CEL's bind macro, validations with their
``messageExpression``s, audit annotations, mutations), ``literal(params)``, the policy's params
written into that text (cel-cpp builds a literal from constants, two to three times faster than
it converts the same Python value bound per request), and ``run(program, request, plain)``, its
result (``answer``). cel-cpp pays a conversion of the bound data and a
call per evaluation; one evaluation pays them once, and the program returns only what the
caller uses: ``false`` when a match condition is false, ``true`` when every validation holds
and there is nothing else to say, else the validations' outcomes, audit values and mutations.
Also owns ``joined(sources)``: the programs of every policy in force on an event as one list,
so a request with several NodePolicies pays the call and the conversion once
(``run_joined``); an error in any of them fails the list, and each then runs alone.

The program is only a faster way to the same answer: any error, any value of an unexpected
type, or a variable that is not data gives ``None``, and the caller takes the exact path
(``program``), expression by expression, which decides what the error means (a variable's error
matters only to an expression that reads it; a false condition wins over another's error; the
iteration budget is per expression there). So the program may short-circuit where the exact
path would not: an error it skips is one the exact path would not have reported either. Must
not decide anything itself.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_INT64 = 2**63


@dataclass(frozen=True, slots=True)
class ProgramResult:
    applies: bool
    # Per validation: None if it held, else its messageExpression's value (a list of one) or
    # [] when it has none.
    failures: tuple[list[Any] | None, ...] = ()
    audit: tuple[Any, ...] = ()
    mutations: tuple[Any, ...] = ()


class NotRun(enum.Enum):
    """A policy's program was not run (none joined, or the joined program failed)."""

    NOT_RUN = "not run"


NOT_RUN = NotRun.NOT_RUN
# What a caller knows of a policy's program on a request: its answer, None (take the exact
# path) or NOT_RUN.
Answer = ProgramResult | NotRun | None
DOES_NOT_APPLY = ProgramResult(applies=False)
# Applies, every validation holds, no audit annotations, no mutations: nothing to say.
ALL_HOLD = ProgramResult(applies=True)


def _wrap(expression: str) -> str:
    # Newlines: a '//' comment in the expression ends at its own line.
    return f"(\n{expression}\n)"


def literal(value: Any) -> str | None:
    """``value`` (params: YAML data) as a CEL literal that evaluates to what binding it gives;
    None when it has no such literal (a date, bytes, an int beyond int64, inf, nan, a
    str holding a NUL)."""
    try:
        return _literal(value)
    except ValueError:
        return None


def _literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and -_INT64 < value < _INT64:
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, str) and "\0" not in value:  # bound, a str ends at a NUL: keep that
        # JSON's escapes (\" \\ \n \uXXXX for control characters) are CEL's too; without
        # ensure_ascii no surrogate pair is written.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return f"[{', '.join(map(_literal, value))}]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"no CEL literal for a {type(value).__name__}")


def source(conditions: Sequence[str], variables: Sequence[tuple[str, str]],
           validations: Sequence[tuple[str, str | None]], audit: Sequence[str],
           mutations: Sequence[str], params: str) -> str:
    """The policy as one expression over the request, ``params`` (a CEL literal) bound in it:
    ``false`` if a condition is false; ``true`` if every validation holds and there are no
    audit annotations or mutations; else ``[[validation...], [audit...], [mutation...]]``."""
    checks = []
    for expression, message in validations:
        checks.append(_wrap(expression) if message is None else
                      f"({_wrap(expression)} ? true : [{_wrap(message)}])")
    listed = (f"[[{', '.join(checks)}], [{', '.join(map(_wrap, audit))}], "
              f"[{', '.join(map(_wrap, mutations))}]]")
    if audit or mutations or not validations:
        body = listed
    else:  # the common answer without building a list; failures are evaluated again
        body = f"({' && '.join(_wrap(e) for e, _ in validations)}) ? true : {listed}"
    body = f"cel.bind(variables, {{}}, {body})" if not variables else body
    for i in range(len(variables) - 1, -1, -1):  # the first variable's binding outermost
        earlier = ", ".join(f"'{n}': variables.{n}" for n, _ in variables[:i])
        entry = f"'{variables[i][0]}': {_wrap(variables[i][1])}"
        body = f"cel.bind(variables, {{{', '.join(filter(None, (earlier, entry)))}}}, {body})"
    if conditions:  # && is commutative over errors: a false condition wins, as on the exact path
        body = f"({' && '.join(map(_wrap, conditions))}) ? {body} : false"
    return f"cel.bind(params, {params}, {body})"


def run(program: Any, request: Mapping[str, Any], plain: Sequence[bool]
        ) -> ProgramResult | None:
    """The program's values on ``request``; None: take the exact path. ``plain[i]``: validation
    i has no messageExpression (its value must be a bool)."""
    try:
        # No value.type() check (half a microsecond): the program's value is a bool or a list,
        # and an error's plain value is its message, a str.
        value = program.eval(data=request).plain_value()
    except (RuntimeError, ValueError, TypeError):
        return None
    return answer(value, plain)


def answer(value: Any, plain: Sequence[bool]) -> ProgramResult | None:
    """What a policy's program value says (see ``run``)."""
    if value is True:
        return ALL_HOLD
    if value is False:
        return DOES_NOT_APPLY
    if not isinstance(value, list):
        return None
    checks, audit, mutations = value
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


def joined(sources: Sequence[str]) -> str:
    """Several policies' programs as one, whose value lists theirs in order."""
    return f"[{', '.join(map(_wrap, sources))}]"


def run_joined(program: Any, request: Mapping[str, Any],
               plains: Sequence[Sequence[bool] | None]) -> tuple[Answer, ...]:
    """Per policy, its answer from the programs ``joined`` in order (``plains[i]``: policy i's
    ``plain``, None when it has no program and is not in the list: ``NOT_RUN``). If any of them
    failed (an error in one element is the whole list's), every answer is ``NOT_RUN``: each
    program then runs alone."""
    try:
        values = program.eval(data=request).plain_value()
    except (RuntimeError, ValueError, TypeError):
        values = None
    # Not a list: an error's plain value (its message). A list has one element per joined
    # program, as ``joined`` wrote it.
    if not isinstance(values, list):
        return (NOT_RUN,) * len(plains)
    found: list[Answer] = []
    at = 0
    for plain in plains:
        if plain is None:
            found.append(NOT_RUN)
            continue
        found.append(answer(values[at], plain))
        at += 1
    return tuple(found)
