"""The legs of the range walk: how the SDK, the published schema and the bridge answer one edge
value of the contract (bridge.contract.value_rules.edges), each as the dotted reply path the
refusal names (``adjust.linux.resources.cpu.shares``, ``update[0].linux.resources.cpu.quota``,
``adjust.env[0].key``), or None when accepted. A leg of its own (CEL's) joins the walk by
answering the same question for the same ``Edge``s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError

from bridge.contract import value_rules
from bridge.contract.adjustment_fields import ALL_KINDS
from bridge.contract.schema import SCHEMA_DIR
from bridge.webhooks.failures import WebhookFailure
from bridge.webhooks.guard import Scope, parse_reply
from policy_server.sdk import adjustment_from_json
from policy_server.sdk.decision import Decision
from policy_server.sdk.decision_json import update_from_json

# A webhook allowed everything the allow list can name: only the value checks refuse.
EVERYTHING = frozenset(ALL_KINDS | {"unified:*", "annotations:*", "env:*", "limits:oom_score_adj",
                                    "limits:pids", "limits:hugepages"})
_SDK_PATH = re.compile(r"\(reply contract: ([^)]*)\)")


@dataclass(frozen=True, slots=True)
class Case:
    """A reply, the field path a refusal of it must name, and whether the contract takes it."""

    name: str
    reply: dict[str, Any]
    path: str
    inside: bool
    needs_format: bool = False  # inside the schema's pattern, outside its named format


def cases() -> Iterator[Case]:
    """Every edge of value_rules, then the reply's own limits (warnings, the reject reason)."""
    for edge in value_rules.edges():
        check = edge.rule.check
        needs_format = (
            not edge.inside and isinstance(check, value_rules.Text) and check.pattern is not None
            and isinstance(edge.value, str)
            and value_rules.compile_pattern(check.pattern).search(edge.value) is not None)
        yield Case(f"{edge.path}={edge.value!r}", edge.reply(), edge.path, edge.inside,
                   needs_format)
    most, chars = value_rules.MAX_WARNINGS, value_rules.MAX_WARNING_CHARS
    reason = value_rules.MAX_REASON_CHARS
    yield Case(f"warnings*{most}", {"warnings": ["w"] * most}, "warnings", True)
    yield Case(f"warnings*{most + 1}", {"warnings": ["w"] * (most + 1)}, "warnings", False)
    # Longer warnings and reasons are accepted and cut (one semantics: value_rules).
    yield Case(f"warning {chars + 1}", {"warnings": ["w" * (chars + 1)]}, "warnings[0]", True)
    for text, ok in (("x", True), ("x" * (reason + 1), True), ("", False), (" \t", False)):
        yield Case(f"reason {len(text)}", {"reject": {"reason": text}}, "reject.reason", ok)


def dotted(sdk_path: str) -> str:
    """The SDK's contract path (``update/[]/linux/resources/cpu/quota``) as the reply's dotted
    path of the first item (``update[0].linux.resources.cpu.quota``)."""
    return sdk_path.replace("/[]", "[0]").replace("/", ".")


def sdk(case: Case) -> str | None:
    """The SDK building the reply's values (its from_json readers and constructors)."""
    reply = case.reply
    try:
        Decision(
            adjust=adjustment_from_json(reply["adjust"]) if "adjust" in reply else None,
            update=tuple(update_from_json(u) for u in reply.get("update", ())),
            reject=reply["reject"]["reason"] if "reject" in reply else None,
            warnings=tuple(reply.get("warnings", ())))
    except ValueError as exc:
        found = _SDK_PATH.search(str(exc))
        assert found is not None, f"the SDK's refusal names no contract path: {exc}"
        return dotted(found.group(1))
    return None


@cache
def _validator(event: str, formats: bool) -> Any:
    schema = json.loads((SCHEMA_DIR / "events" / f"{event}.reply.schema.json").read_text())
    checker = jsonschema.FormatChecker()
    if formats:  # a schema reader implementing the formats the schema names
        for name, check in value_rules.FORMATS.items():
            checker.checks(name)(_fits(check))
    return jsonschema.Draft202012Validator(schema, format_checker=checker)


def _fits(check: Callable[[str], str | None]) -> Callable[[object], bool]:
    return lambda value: not isinstance(value, str) or check(value) is None


def schema(case: Case, formats: bool = False) -> str | None:
    """`jsonschema` with the published CreateContainer reply schema (``formats``: with the
    schema's named formats implemented)."""
    errors = list(_all(_validator("CreateContainer", formats).iter_errors(case.reply)))
    if not errors:
        return None
    deepest = max(errors, key=lambda e: len(e.absolute_path))  # the field, not its parents
    return str(deepest.json_path).removeprefix("$.")


def _all(errors: Iterable[ValidationError]) -> Iterator[ValidationError]:
    """Every error, with those inside an ``anyOf`` (the branch an optional field is in)."""
    for error in errors:
        yield error
        yield from _all(error.context or ())


def bridge(case: Case) -> str | None:
    """The bridge's reply guard (a CreateContainer; the update's target is known)."""
    scope = Scope(event="CreateContainer", allow=EVERYTHING, knows_container=lambda _: True)
    try:
        parse_reply(case.reply, "walk", scope)
    except WebhookFailure as exc:
        message = str(exc).split(": ", 1)[1]  # "<kind>: <path>: <problem>"
        return message.split(": ", 1)[0]
    return None


def cel(case: Case) -> str | None:
    """A ``cel`` NodePolicy's mutation setting the case's value: the conversion its load check
    (a constant) and its run time (a computed value) both go through
    (``policy_server.policies.cel.mutation_check.change``). None for the reply's own limits
    (warnings, the reject reason), which a mutation does not write."""
    from policy_server.policies.cel import mutation_check
    from policy_server.sdk import EventName

    reply = case.reply
    try:
        if "adjust" in reply:
            mutation_check.change(EventName.CREATE_CONTAINER, "c1",
                                  mutation_check.sorted_doc(reply["adjust"]))
        elif "update" in reply:
            update = reply["update"][0]
            mutation_check.change(EventName.UPDATE_CONTAINER, update["container_id"],
                                  mutation_check.sorted_doc({"linux": update["linux"]}))
    except ValueError as exc:
        found = _SDK_PATH.search(str(exc))
        assert found is not None, f"the CEL refusal names no contract path: {exc}"
        return dotted(found.group(1))
    return None
