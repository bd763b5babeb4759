"""Every value range and grammar of a webhook reply, declared once.

A policy's reply is typed by NRI's messages (nri_models: proto types and integer widths); what
the types cannot say is declared here: cpu shares 2..262144, a quota of -1 or at least 1000, CPU
lists, cgroup v2 file names, sysctl and variable names, absolute paths, and the reply's own
limits (warnings, the reject reason). Everything that checks a reply reads this table:

- the pydantic reply models and so the published JSON Schemas (bridge.contract.reply_models,
  ``python -m bridge.contract.schema``: ``minimum``/``maximum``, ``anyOf``, ``pattern``,
  ``format``, ``propertyNames``, ``maxItems``/``maxLength``);
- the policy SDK's construction checks (policy_server.sdk.limit_checks, read off that schema);
- the bridge's value checks (bridge.webhooks.values.CHECKS) and reply limits
  (bridge.webhooks.guard);
- the tables of docs/webhooks.md ("Value ranges", generated: bridge.contract.value_docs).

A rule's ``path`` is its reply JSON path below ``adjust`` (an update's ``linux.resources`` has
the same rules): ``linux.resources.cpu.shares``, ``env[].key`` (a field of each list item),
``linux.sysctl`` with ``keys=True`` (the map's keys). The reply limits: more than 100 warnings
is refused; a longer warning or reject reason is cut (the schema says so, the SDK and the bridge
cut it the same way), so a giant reason still rejects.

Owns the rules, their edge values (``edges``: just inside, just outside) and the grammar
checks. Must not import pydantic, protobuf messages or anything that checks (they read this).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from bridge.contract.adjustment_fields import ADJUSTMENT_FIELDS, REMOVABLE
from bridge.contract.cpu_list_grammar import MAX_CPU_ID as MAX_CPU_ID
from bridge.contract.cpu_list_grammar import CpuListError, check_cpu_list_syntax

INT64_MAX = 2**63 - 1

# The reply's own limits (WebhookReply), one semantics in the schema, the SDK and the bridge:
# more than MAX_WARNINGS warnings is refused; a longer warning or reason is accepted and cut to
# its length (a reject must stay a reject: refusing it would hand it to the failure policy).
MAX_WARNINGS = 100  # warnings: items (refused above)
MAX_WARNING_CHARS = 1024  # each warning: characters (cut to)
MAX_REASON_CHARS = 4096  # reject.reason: characters (cut to)
REASON_PATTERN = r"\S"  # reject.reason holds something other than white space


@dataclass(frozen=True, slots=True)
class IntRange:
    """``low <= value <= high``, or ``value == also`` (quota's -1: "no limit")."""

    low: int
    high: int
    also: int | None = None
    means: str = ""  # what ``also`` means, for the schema's description

    def problem(self, value: int) -> str | None:
        if self.low <= value <= self.high or value == self.also:
            return None
        if self.also is None:
            return f"{value} out of range [{self.low}, {self.high}]"
        return f"{value} out of range: {self.also} or [{self.low}, {self.high}]"

    def text(self) -> str:
        top = "" if self.high == INT64_MAX else f"{self.high}"
        span = f"≥ {self.low}" if not top else f"{self.low} to {top}"
        return span if self.also is None else f"{self.also} ({self.means}) or {span}"

    def edges(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Values just inside and just outside."""
        inside = [self.low, self.high] + ([] if self.also is None else [self.also])
        outside = [self.low - 1] + ([] if self.high == INT64_MAX else [self.high + 1])
        if self.also is not None:
            outside += [v for v in (self.also - 1, self.also + 1)
                        if v != self.low and not self.low <= v <= self.high]
        return tuple(inside), tuple(dict.fromkeys(outside))


@dataclass(frozen=True, slots=True)
class Text:
    """A string grammar: ``pattern`` (a JSON Schema pattern, valid in Python's ``re`` and in
    ECMA-262; a final ``$`` is read as the end of the text) and ``min_length`` say the shape;
    ``problem`` is the whole check (for a CPU list also ``low <= high <= 65535``, which no
    pattern says: ``format`` names that check for schema readers, ``FORMATS``)."""

    name: str  # for docs: "CPU list"
    pattern: str | None
    problem: Callable[[str], str | None]
    says: str  # for docs and the schema's description
    inside: tuple[str, ...]
    outside: tuple[str, ...]
    format: str | None = None
    min_length: int | None = None

    def edges(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return self.inside, self.outside

    def text(self) -> str:
        return self.says


def _short(text: str) -> str:
    return repr(text[:64])


def _cpu_list(text: str) -> str | None:
    if not text:
        return None  # empty: unset, as absent
    try:
        check_cpu_list_syntax(text)
    except CpuListError as exc:
        if exc.element is None:
            return f"invalid cpuset {_short(text)} (expected e.g. 0-3,8)"
        return f"invalid range {_short(exc.element)} in cpuset {_short(text)}"
    return None


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """A schema pattern for Python: searched, its final ``$`` the end of the text (as in
    ECMA-262, where ``$`` never matches before a final line feed)."""
    return re.compile(pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern)


def _matches(pattern: str, message: Callable[[str], str]) -> Callable[[str], str | None]:
    compiled = compile_pattern(pattern)
    return lambda text: None if compiled.search(text) else message(text)


def _non_empty(message: str) -> Callable[[str], str | None]:
    return lambda text: None if text else message


_UNIFIED = r"^[a-z0-9_]+\.[a-z0-9_.]+$"
_SYSCTL = r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$"
_ENV = "^[^=\\u0000]+$"
_ABSOLUTE = r"^/"

CPU_LIST = Text(
    "CPU list", r"^([0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)?$", _cpu_list,
    f"a CPU list: N or N-M separated by commas, 0 ≤ N ≤ M ≤ {MAX_CPU_ID}, no white space "
    "(empty: the same as absent)",
    inside=("", "0", "0-3,8", f"{MAX_CPU_ID}"),
    outside=("0, 1", "0-", ",0", "3-1", f"{MAX_CPU_ID + 1}"), format="cpu-list")
UNIFIED_KEY = Text(
    "cgroup v2 file name", _UNIFIED,
    _matches(_UNIFIED, lambda k: f"{_short(k)} is not a cgroup v2 file name"),
    "a cgroup v2 file name: controller.file (lower case, digits, `_`, `.`)",
    inside=("memory.high", "cpu.weight_nice"), outside=("memory", "../memory.high", "Memory.high"))
SYSCTL_NAME = Text(
    "sysctl name", _SYSCTL, _matches(_SYSCTL, lambda k: f"invalid sysctl name {_short(k)}"),
    "a sysctl name: letters, digits, `_`, then also `.`, `/`, `-`",
    inside=("net.ipv4.ip_forward", "kernel/msgmax"), outside=("", "-net", "net ipv4", "a=b"))
ENV_NAME = Text(
    "variable name", _ENV, _matches(_ENV, lambda k: f"invalid variable name {_short(k)}"),
    "a variable name: not empty, no `=`, no NUL",
    inside=("A", "x.y-z"), outside=("", "A=B", "A\0B"))
ABSOLUTE = Text(
    "absolute path", _ABSOLUTE, _matches(_ABSOLUTE, lambda _: "must be an absolute path"),
    "an absolute path (starts with `/`)", inside=("/", "/data"), outside=("", "data", "./d"))
PAGE_SIZE = Text(
    "page size", None, _non_empty("must not be empty"), "a page size name, e.g. 2MB (not empty)",
    inside=("2MB", "1GB"), outside=("",), min_length=1)
ANNOTATION_KEY = Text(
    "annotation key", None, _non_empty("empty annotation key"), "an annotation key (not empty)",
    inside=("a", "example.com/x"), outside=("",), min_length=1)


@dataclass(frozen=True, slots=True)
class Rule:
    """The range or grammar of the value at ``path`` (below ``adjust``; ``keys``: of the map's
    keys, not its values)."""

    path: str
    check: IntRange | Text
    keys: bool = False


_MEMORY = IntRange(-1, INT64_MAX, means="")
RULES: tuple[Rule, ...] = (
    Rule("annotations", ANNOTATION_KEY, keys=True),
    Rule("mounts[].destination", ABSOLUTE),
    Rule("env[].key", ENV_NAME),
    Rule("linux.devices[].path", ABSOLUTE),
    Rule("linux.sysctl", SYSCTL_NAME, keys=True),
    Rule("linux.oom_score_adj", IntRange(-1000, 1000)),
    Rule("linux.resources.cpu.cpus", CPU_LIST),
    Rule("linux.resources.cpu.mems", CPU_LIST),
    Rule("linux.resources.cpu.shares", IntRange(2, 262144)),
    Rule("linux.resources.cpu.period", IntRange(1000, 1_000_000)),
    Rule("linux.resources.cpu.quota", IntRange(1000, INT64_MAX, also=-1, means="no limit")),
    Rule("linux.resources.memory.limit", _MEMORY),
    Rule("linux.resources.memory.reservation", _MEMORY),
    Rule("linux.resources.memory.swap", _MEMORY),
    Rule("linux.resources.memory.swappiness", IntRange(0, 100)),
    Rule("linux.resources.unified", UNIFIED_KEY, keys=True),
    Rule("linux.resources.hugepage_limits[].page_size", PAGE_SIZE),
)
# The paths below `adjust` that an update's `linux` also has (LinuxContainerUpdate.resources).
UPDATE_PREFIX = "linux.resources."

# The grammars a schema names by `format` (a check a pattern cannot express), for its readers.
FORMATS: Mapping[str, Callable[[str], str | None]] = MappingProxyType({
    "cpu-list": _cpu_list,
})

# remove.<key> (adjust.remove): the removable fields (bridge.contract.adjustment_fields), in
# table order, and the grammar of the names each lists: the rule of the entry's identifying key.
REMOVAL_KEYS: tuple[str, ...] = tuple(REMOVABLE)
# What the names under each remove.<key> are, for the schema's description.
REMOVAL_NAMES_ARE: Mapping[str, str] = MappingProxyType({
    "annotations": "annotation keys",
    "mounts": "mount destinations",
    "env": "variable names (only undoes other plugins' additions; the runtime keeps "
           "pre-existing ones)",
    "devices": "device paths",
    "namespaces": "namespace types",
    "sysctl": "sysctl names",
    "net_devices": "host device names",
})
assert set(REMOVAL_NAMES_ARE) == set(REMOVAL_KEYS), "a removable field without a description"


def _removal_rule(key: str) -> Text | None:
    field = key if key in ADJUSTMENT_FIELDS else f"linux.{key}"
    named = f"{field}[].{REMOVABLE[key].key}"  # a list: its entries' identifying field
    for rule in RULES:
        if isinstance(rule.check, Text) and (
                rule.path == named or (rule.keys and rule.path == field)):
            return rule.check
    return None


REMOVAL_NAMES: Mapping[str, Text | None] = MappingProxyType(
    {key: _removal_rule(key) for key in REMOVAL_KEYS})


@dataclass(frozen=True, slots=True)
class Edge:
    """One value at a rule's edge, and the reply JSON path (dotted) of the field it sits in."""

    rule: Rule
    path: str  # e.g. adjust.linux.resources.cpu.shares, update[0].linux.resources.cpu.quota
    value: int | str
    inside: bool

    def reply(self, container_id: str = "c1") -> dict[str, object]:
        """A reply holding just this value (CreateContainer's `adjust`, or an `update` of
        ``container_id``)."""
        body: object = self.value
        parts = self.rule.path.split(".")
        leaf = parts.pop()
        if self.rule.keys:
            body = {leaf: {self.value: _MAP_VALUE.get(self.rule.path, "1")}}
        else:
            body = {leaf: self.value}
        body = _nest(parts, body)
        if self.path.startswith("update"):
            return {"update": [{"container_id": container_id, **body}]}
        return {"adjust": body}


_MAP_VALUE = {"linux.resources.unified": "max"}
# What an item holding the checked field needs beside it (a valid rest of the entry).
_ITEM_REST: Mapping[str, Mapping[str, object]] = MappingProxyType({
    "mounts": {"source": "tmpfs", "type": "tmpfs"},
    "env": {"value": "1"},
    "devices": {"type": "c", "major": 1, "minor": 3},
    "hugepage_limits": {"limit": 0},
})


def _nest(parts: list[str], body: object) -> dict[str, object]:
    for part in reversed(parts):
        if part.endswith("[]"):
            name = part[:-2]
            assert isinstance(body, dict)
            body = {name: [{**_ITEM_REST.get(name, {}), **body}]}
        else:
            body = {part: body}
    assert isinstance(body, dict)
    return body


def edges() -> Iterator[Edge]:
    """Every rule's edge values, in `adjust` and (for resources) in an `update`: the table the
    acceptance test walks through the SDK, the published schema, the bridge and CEL."""
    for rule in RULES:
        inside, outside = rule.check.edges()
        roots = ["adjust"] + (["update[0]"] if rule.path.startswith(UPDATE_PREFIX) else [])
        for root in roots:
            for values, ok in ((inside, True), (outside, False)):
                for value in values:
                    yield Edge(rule, f"{root}.{json_path(rule)}", value, ok)


def json_path(rule: Rule) -> str:
    """The dotted path of the field a message about the rule names: ``env[0].key``, the map
    itself for a key rule."""
    return rule.path.replace("[]", "[0]")
