"""What is wrong with a suite, every problem at once, each with its field and line.

Owns: `SuiteError` (exit 2; one or more problems, each `path:line: field: problem`), and
translating a pydantic `ValidationError` of the suite document into problems — the key path as
a user writes it (`cases[0].expect[1].verdict`), the line from the YAML (bridge.strict_yaml),
an unknown key with the nearest known one (`manifest` -> `manifests`, and then no second
problem saying `manifests` is missing).
Must not: read files or decide what is valid (bridge.suite.document does).
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from bridge.strict_yaml import Path, line_of


@dataclass(frozen=True, slots=True)
class Problem:
    field: str
    problem: str
    line: int | None = None

    def render(self, path: str) -> str:
        where = f"{path}:{self.line}" if self.line is not None else path
        return f"{where}: {self.field + ': ' if self.field else ''}{self.problem}"


class SuiteError(Exception):
    """A bad suite: every problem found, one line each (`path:line: field: problem`)."""

    def __init__(self, path: str, field: str = "", problem: str = "", *,
                 problems: Sequence[Problem] = (), line: int | None = None) -> None:
        self.problems = tuple(problems) or (Problem(field, problem, line),)
        super().__init__("\n".join(p.render(path) for p in self.problems))
        self.path = path
        self.field, self.problem = self.problems[0].field, self.problems[0].problem


def pydantic_field_path(loc: Sequence[str | int]) -> str:
    """`cases[0].expect[1].verdict` for pydantic's ("cases", 0, "expect", 1, "verdict")."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def loc_of(field: str) -> Path:
    """("cases", 0, "manifests", 1) for `cases[0].manifests[1]` (field_name's inverse)."""
    return tuple(int(part) if part.isdigit() else part
                 for part in re.findall(r"[^.\[\]]+", field))


def with_lines(problems: Sequence[Problem], lines: dict[Path, int]) -> list[Problem]:
    """`problems`, each without a line given the line of its field."""
    return [p if p.line is not None or not p.field
            else replace(p, line=line_of(lines, loc_of(p.field))) for p in problems]


def from_validation(exc: ValidationError, model: type[BaseModel],
                    lines: dict[Path, int]) -> list[Problem]:
    """Every error of `exc` (validating `model`) as a problem with its line."""
    problems: list[tuple[Path, Problem]] = []
    suggested: set[Path] = set()
    for error in exc.errors():
        # Literal unions and validator functions report the failing member: not a key.
        loc: Path = tuple(p for p in error["loc"]
                          if not (isinstance(p, str) and p.startswith(("literal[", "function-"))))
        kind = error["type"]
        if kind == "extra_forbidden":
            known = _fields(model, loc[:-1])
            near = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6) or [
                k for k in known if k.startswith(str(loc[-1]))][:1]
            if near:
                suggested.add((*loc[:-1], near[0]))
            text = "unknown key" + (f"; did you mean {near[0]}?" if near else
                                    f"; known: {', '.join(known)}" if known else "")
        elif kind == "missing":
            text = "required"
        else:
            text = str(error["msg"]).removeprefix("Value error, ")
        problems.append((loc, Problem(pydantic_field_path(loc), text, line_of(lines, loc))))
    # `manifest:` misspelt is one problem (an unknown key, with the suggestion), not two.
    kept = [p for loc, p in problems if not (p.problem == "required" and loc in suggested)]
    return sorted(kept, key=lambda p: p.line if p.line is not None else 1 << 30)


def _fields(model: type[BaseModel], loc: Path) -> list[str]:
    """The keys the model at `loc` (inside `model`) knows."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if _is_model(current) else None
        if field is None:
            return []
        current = _model_in(field.annotation)
        if current is None:
            return []
    return sorted(current.model_fields) if _is_model(current) else []


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model in `annotation` (`Case`, `list[Case]`, `Node | None`), if any."""
    if _is_model(annotation):
        return typing.cast(type[BaseModel], annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
