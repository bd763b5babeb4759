"""Checking a case's expectations against what `try` found, and saying what differs.

Owns: selecting the containers an expectation is about (pod and container patterns), the
verdict of a container (rejected / adjusted / unchanged, within one webhook or all), looking up
dotted paths in an adjustment or the effective values (a key that itself contains dots, such as
an annotation or `memory.swap.max`, is found as written), comparing values (equality, `null` for
absent, `{contains: X}`, `{not_contains: X}`, `{matches: RE}`), and rendering each mismatch as
expected/got lines or a unified diff. Works on the objects of `try --output json`
(bridge.trial.report).
Must not: run anything.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from bridge.suite.document import Expectation, operator_of


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Any = _Absent()  # a path that leads nowhere


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One expectation that did not hold: where, what was expected, what was found."""

    where: str
    expected: Any
    got: Any

    def render(self, indent: str = "    ") -> str:
        """Expected and got on a line each; two structures as a unified diff; a long value
        (what a `contains` looked in) as an indented block."""
        want, have = _show(self.expected), _show(self.got)
        lines = [f"{indent}{self.where}"]
        if _structured(self.expected) and _structured(self.got):
            diff = difflib.unified_diff(want.splitlines(), have.splitlines(), "expected", "got",
                                        lineterm="")
            return "\n".join(lines + [f"{indent}  {line}" for line in diff])
        for label, text in (("expected:", want), ("got:     ", have)):
            if "\n" in text:
                lines.append(f"{indent}  {label.rstrip()}")
                lines += [f"{indent}    {line}" for line in text.splitlines()]
            else:
                lines.append(f"{indent}  {label} {text}")
        return "\n".join(lines)


def _structured(value: Any) -> bool:
    return isinstance(value, dict | list) and operator_of(value) is None


def _show(value: Any) -> str:
    if value is ABSENT:
        return "<absent>"
    if isinstance(value, Description):
        return str(value)
    operator = operator_of(value)
    if operator is not None:
        return f"{operator[0]} {json.dumps(operator[1], sort_keys=True)}"
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2, sort_keys=True)
    return json.dumps(value)


class Description(str):
    """A description rather than a value: shown without quotes."""


def check_expectation(expectation: Expectation,
                      objects: Sequence[dict[str, Any]]) -> list[Mismatch]:
    """Every way the containers `expectation` is about differ from it (empty: it holds)."""
    chosen = [o for o in objects if _pod_matches(expectation.pod, o["pod"])
              and (expectation.container is None
                   or fnmatchcase(o["container"], expectation.container))]
    if not chosen:
        what = f"pod {expectation.pod}" + (f" container {expectation.container}"
                                          if expectation.container else "")
        found = sorted({f"{o['pod']} {o['container']}" for o in objects})
        return [Mismatch(what, Description("a matching container"), found)]
    return [m for o in chosen for m in _check_one(expectation, o)]


def _pod_matches(pattern: str, pod: str) -> bool:
    """`namespace/name` patterns match the whole; a bare name matches in any namespace."""
    return fnmatchcase(pod if "/" in pattern else pod.partition("/")[2], pattern)


pod_matches = _pod_matches  # bridge.suite.checks matches the case's pods before it runs


def _check_one(e: Expectation, o: dict[str, Any]) -> list[Mismatch]:
    label = f"{o['pod']} {o['container']}"
    mine = e.webhook is None
    adjusts = [(w, a) for w, a in o["adjust"].items() if mine or w == e.webhook]
    updated = [w for w, u in o["update"].items() if u and (mine or w == e.webhook)]
    reject = o["reject"] if o["reject"] and (mine or o["reject"]["webhook"] == e.webhook) \
        else None
    warnings = [w["message"] for w in o["warnings"] if mine or w["webhook"] == e.webhook]
    out: list[Mismatch] = []
    verdict = e.verdict or ("rejected" if e.reject is not None else None)
    if verdict is not None:
        got = _verdict(reject, [w for w, _ in adjusts], updated)
        if got == "unchanged" and o["effective"] is None:
            got = _never_created(o)  # not `unchanged`: nothing ran to be left alone
        if not got.startswith(verdict):
            out.append(Mismatch(f"{label}: verdict", Description(verdict), Description(got)))
    if e.qos_class is not None and o["qos_class"] != e.qos_class:
        out.append(Mismatch(f"{label}: qos_class", e.qos_class, o["qos_class"]))
    if e.cgroup_parent is not None and not re.search(e.cgroup_parent, o["cgroup_parent"]):
        out.append(Mismatch(f"{label}: cgroup_parent", Description(f"matching /{e.cgroup_parent}/"),
                            o["cgroup_parent"]))
    if e.reject is not None and reject is not None \
            and not re.search(e.reject, str(reject["reason"])):
        out.append(Mismatch(f"{label}: reject reason", Description(f"matching /{e.reject}/"),
                            reject["reason"]))
    for path, expected in (e.adjust or {}).items():
        got = next((v for v in (lookup(a, path) for _, a in adjusts) if v is not ABSENT), ABSENT)
        if not matches(expected, got):
            out.append(Mismatch(f"{label}: adjust {path}", expected, got))
    for path, expected in (e.effective or {}).items():
        got = (Description("<never created>") if o["effective"] is None
               else lookup(o["effective"], path))
        if o["effective"] is None or not matches(expected, got):
            out.append(Mismatch(f"{label}: effective {path}", expected, got))
    out += _warnings(label, e.warnings, warnings)
    notes = [n["message"] for n in o["runtime"] if mine or n["webhook"] == e.webhook]
    out += _warnings(label, e.runtime, notes, "runtime")
    return out


def _verdict(reject: dict[str, Any] | None, adjusted: list[str], updated: list[str]) -> str:
    if reject is not None:
        who = reject["webhook"] or "runtime"
        return f"rejected ({who}, {reject['event']}: {reject['reason']})"
    if adjusted or updated:
        return "adjusted (by " + ", ".join(dict.fromkeys([*adjusted, *updated])) + ")"
    return "unchanged"


def _never_created(o: dict[str, Any]) -> str:
    """Why a container that is neither rejected nor adjusted (for the webhooks looked at)
    has no effective values: another webhook rejected it, or kubelet never got to it."""
    if o["reject"] is not None:
        r = o["reject"]
        return f"never created (rejected by {r['webhook'] or 'runtime'}, {r['event']})"
    why = next((w["message"] for w in o["warnings"] if not w["webhook"]), "")
    return f"never created ({why})" if why else "never created"


def _warnings(label: str, patterns: list[str] | None, messages: list[str],
              what: str = "warnings") -> list[Mismatch]:
    if patterns is None:
        return []
    if not patterns:
        return [Mismatch(f"{label}: {what}", [], messages)] if messages else []
    return [Mismatch(f"{label}: {what}", Description(f"one matching /{p}/"), messages)
            for p in patterns if not any(re.search(p, m) for m in messages)]


def lookup(value: Any, path: str) -> Any:
    """The value at dotted `path` (list items by index), or ABSENT."""
    return _lookup(value, path.split("."))


def _lookup(value: Any, parts: list[str]) -> Any:
    if not parts:
        return value
    if isinstance(value, dict):
        # The longest key first: `annotations.example.com/team` finds "example.com/team".
        for j in range(len(parts), 0, -1):
            key = ".".join(parts[:j])
            if key in value:
                found = _lookup(value[key], parts[j:])
                if found is not ABSENT:
                    return found
        return ABSENT
    if isinstance(value, list) and re.fullmatch(r"-?\d+", parts[0]):
        index = int(parts[0])
        if -len(value) <= index < len(value):
            return _lookup(value[index], parts[1:])
    return ABSENT


def matches(expected: Any, got: Any) -> bool:
    """`got` satisfies `expected`: equal (booleans are not numbers), null for absent or null,
    `{contains: X}` (an item of a list, a key of a mapping, a substring; X a list: each of it),
    `{not_contains: X}` (none of that; an absent value contains nothing),
    `{matches: RE}` (a string searched, other values as JSON)."""
    operator = operator_of(expected)
    if operator is not None and operator[0] == "not_contains":
        return got is ABSENT or not _holds_any(got, operator[1])
    if operator is not None and got is not ABSENT:
        name, operand = operator
        if name == "matches":
            text = got if isinstance(got, str) else json.dumps(got, sort_keys=True)
            return re.search(str(operand), text) is not None
        if isinstance(got, str):
            return str(operand) in got
        if isinstance(got, dict | list):
            items = operand if isinstance(operand, list) else [operand]
            return all(_contains(got, item) for item in items)
        return False
    if expected is None:
        return got is ABSENT or got is None
    return got is not ABSENT and _equal(expected, got)


def _holds_any(got: Any, operand: Any) -> bool:
    """Whether `got` holds any of `operand` (a list: any item of it) as `contains` means it."""
    items = operand if isinstance(operand, list) else [operand]
    if isinstance(got, str):
        return any(str(item) in got for item in items)
    if isinstance(got, dict | list):
        return any(_contains(got, item) for item in items)
    return False


def _contains(got: dict[str, Any] | list[Any], item: Any) -> bool:
    if isinstance(got, dict):
        return item in got
    return any(_equal(item, g) for g in got)


def _equal(expected: Any, got: Any) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(expected) is type(got) and expected == got
    return bool(expected == got)
