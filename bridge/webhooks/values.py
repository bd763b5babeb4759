"""Value checks the protobuf types cannot express: cpusets, ranges, names, paths.

`from_json` already guarantees types and integer widths; this module refuses
values the runtime would choke on or that smuggle something past the allow
list (e.g. a cgroup `unified` key with a path in it). The ranges and grammars are the
contract's (bridge.contract.value_rules, the same table the published JSON Schemas and the
policy SDK read); here they become one check per adjustable field (`CHECKS`), run by the
reply walk as it passes that field; each raises `ValueProblem(path, problem)`; callers decide
what a problem means. Removal entries (NRI's `-` marker on the entry's name) are checked by
the name's rule, the marker taken off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from bridge.contract.adjustment_fields import FIELD_PATHS
from bridge.contract.value_rules import CPU_LIST, RULES, IntRange, Rule, Text
from bridge.errors import BridgeError


class ValueProblem(BridgeError):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def check_cpuset(text: str, path: str) -> None:
    """A CPU or memory-node list as the runtime writes it: the contract's grammar
    (bridge.contract.cpu_list_grammar), exactly as sent, no whitespace, not empty."""
    problem = CPU_LIST.problem(text) if text else "invalid cpuset '' (expected e.g. 0-3,8)"
    if problem is not None:
        raise ValueProblem(path, problem)


Check = Callable[[Any, str], None]
_Problem = Callable[[Any], "str | None"]


def _unmark(problem: _Problem) -> _Problem:
    """The check of a removable entry's name: NRI's `-` removal marker is not part of it."""
    return lambda name: problem(name.removeprefix("-"))


def _leaf(rule: Rule) -> _Problem:
    check = rule.check
    if isinstance(check, IntRange):
        return check.problem
    assert isinstance(check, Text)
    return check.problem


def _step(field: str, rule: Rule, rest: str) -> Check:
    """The check of one rule, ``rest`` its path below the table's ``field``."""
    problem = _leaf(rule)
    removable = FIELD_PATHS[field].removable
    if rule.keys:  # the map's keys: the map is named
        keys = _unmark(problem) if removable else problem

        def check_keys(value: Mapping[str, Any], where: str) -> None:
            for key in value:
                if (found := keys(key)) is not None:
                    raise ValueProblem(where, found)
        return check_keys
    if rest.startswith("[]."):  # a field of each entry
        attr = rest[3:]
        entries = _unmark(problem) if removable else problem

        def check_entries(value: Iterable[Any], where: str) -> None:
            for i, entry in enumerate(value):
                if (found := entries(getattr(entry, attr))) is not None:
                    raise ValueProblem(f"{where}[{i}].{attr}", found)
        return check_entries
    if not rest:  # the field itself: an Optional* wrapper

        def check_value(value: Any, where: str) -> None:
            if (found := problem(value.value)) is not None:
                raise ValueProblem(where, found)
        return check_value
    name = rest.removeprefix(".")
    assert "." not in name and "[" not in name, f"value rule {rule.path}: too deep for {field}"
    wrapped = isinstance(rule.check, IntRange)  # integers are Optional* wrappers, strings plain

    def check_sub(value: Any, where: str) -> None:
        if wrapped:
            if not value.HasField(name):
                return
            found = problem(getattr(value, name).value)
        else:
            text = getattr(value, name)
            found = problem(text) if text else None  # "": unset
        if found is not None:
            raise ValueProblem(f"{where}.{name}", found)
    return check_sub


def _field_of(rule: Rule) -> tuple[str, str]:
    """The adjustable field (a FIELD_PATHS entry, what the walk passes) a rule sits in, and the
    rest of its path below it."""
    path = rule.path
    while True:
        plain = path.split("[]", 1)[0]
        if plain in FIELD_PATHS:
            return plain, rule.path[len(plain):]
        assert "." in plain, f"value rule {rule.path} is in no adjustable field"
        path = plain.rsplit(".", 1)[0]


def _checks() -> Mapping[str, Check]:
    steps: dict[str, list[Check]] = {}
    for rule in RULES:
        field, rest = _field_of(rule)
        steps.setdefault(field, []).append(_step(field, rule, rest))
    out: dict[str, Check] = {}
    for field, found in steps.items():
        if len(found) == 1:
            out[field] = found[0]
            continue

        def check_all(value: Any, where: str, found: list[Check] = found) -> None:
            for step in found:
                step(value, where)
        out[field] = check_all
    return MappingProxyType(out)


# Field path (as in the webhook JSON, below `adjust` or an update) -> its check, called with
# the field's value and its JSON path in the reply. Fields not named here need none beyond
# their types. The reply walk (bridge.webhooks.reply_walk) calls these as it passes the field.
CHECKS: Mapping[str, Check] = _checks()

__all__ = ["CHECKS", "ValueProblem", "check_cpuset"]
