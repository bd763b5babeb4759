"""A policy's JSON reply in, a checked `Contribution` out, or a `WebhookFailure`.

Order of checks (each failure names the JSON path):
1. shape: an object whose keys are allowed for the event (contract REPLY_KEYS);
2. types and ranges: `adjustment_from_json` / `from_json`, strict; the reply's own limits
   (bridge.contract.value_rules: over 100 warnings refused, a longer warning or reason cut);
3. allow list: every adjustment and update kind must be in the webhook's `allow`;
4. values: cpusets, ranges, names (bridge.webhooks.values);
5. targets: updates and evictions name containers the state cache knows, never the
   container being created (the runtime would fail CreateContainer), and only containers
   whose pod the webhook's selector matches: its scope binds everything it returns;
6. items: inside the allowed kinds, the unified keys, annotations and env names refused
   until named, and oom_score_adj, pids and hugepage limits inside what the target
   container's QoS class and the node allow (bridge.webhooks.item_check);
7. the node: a cpuset's CPUs and memory nodes are the node's (bridge.webhooks.node_cpusets:
   INVALID, as no runtime could apply it).
A refused kind, item, bound or out-of-scope target is DISALLOWED: the failure policy decides.
Kinds and values, and what the merge and the capability check need later (claims, field
paths), come from one pass over each part (bridge.webhooks.reply_walk), kept in the
Contribution.

This module is pure: no I/O, no logging, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bridge.contract.adjustment import nri_adjustment_from_json
from bridge.contract.catalogue import REPLY_KEYS
from bridge.contract.convert import ConversionError, from_json
from bridge.contract.value_rules import (
    MAX_REASON_CHARS,
    MAX_WARNING_CHARS,
    MAX_WARNINGS,
    REASON_PATTERN,
)
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.item_check import check_adjustment, check_update
from bridge.webhooks.node_cpusets import UNKNOWN as UNKNOWN_CPUS
from bridge.webhooks.node_cpusets import NodeCpus, check_node_cpuset
from bridge.webhooks.reply_walk import Part, ReplyWalk
from bridge.webhooks.selector import Selector
from bridge.webhooks.value_bounds import ReplyTarget
from bridge.webhooks.values import ValueProblem

_REASON = re.compile(REASON_PATTERN)
_UPDATE_KEYS = frozenset({"container_id", "linux", "ignore_failure"})


@dataclass(frozen=True, slots=True)
class Contribution:
    """What one webhook asked for, already checked. Treat the messages as read-only."""

    webhook: str
    adjust: api.ContainerAdjustment | None = None
    updates: tuple[api.ContainerUpdate, ...] = ()
    evictions: tuple[api.ContainerEviction, ...] = ()
    reject: str | None = None
    warnings: tuple[str, ...] = ()
    # What the reply walk found (claims, double sets, field paths); the guard passes the walk
    # it checked with. Built from the messages when not given (a Contribution made in code).
    walk: ReplyWalk | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.walk is None:
            walk = ReplyWalk()
            if self.adjust is not None:
                walk.adjustment(self.adjust)
            for i, update in enumerate(self.updates):
                walk.update(update, f"update[{i}]")
            object.__setattr__(self, "walk", walk)

    @property
    def walked(self) -> ReplyWalk:
        assert self.walk is not None  # set in __post_init__
        return self.walk

    @property
    def changes_something(self) -> bool:
        return self.adjust is not None or bool(self.updates)


# Another container by id: (container, its pod or None), or None if the bridge does not know it.
Lookup = Callable[[str], tuple[api.Container, api.PodSandbox | None] | None]


def _no_hugepages() -> Mapping[str, int]:
    return {}


def _no_node_cpus() -> NodeCpus:
    return UNKNOWN_CPUS


NO_TARGET = ReplyTarget()
EVERY_POD = Selector()


@dataclass(frozen=True, slots=True)
class Scope:
    """What the reply is checked against."""

    event: str
    allow: frozenset[str]
    knows_container: Callable[[str], bool]
    creating: str | None = None  # CreateContainer: the id being created
    # The event's own container and pod: what `adjust` changes.
    target: ReplyTarget = NO_TARGET
    # Update and eviction targets with their pods; without it `knows_container` decides and
    # nothing more is known of them (so a restricted selector refuses them).
    lookup: Lookup | None = None
    selector: Selector = EVERY_POD  # the webhook's: binds every update and eviction
    hugepages: Callable[[], Mapping[str, int]] = _no_hugepages  # the node's, by page size
    node_cpus: Callable[[], NodeCpus] = _no_node_cpus  # the node's online CPUs and mems

    def find(self, container_id: str) -> ReplyTarget | None:
        own = self.target.container
        if own is not None and own.id == container_id:
            return self.target  # the event's own container, in scope by being selected
        if self.lookup is not None:
            found = self.lookup(container_id)
            return None if found is None else ReplyTarget(*found)
        return ReplyTarget() if self.knows_container(container_id) else None

    def known(self, container_id: str, where: str) -> ReplyTarget:
        """The target `container_id` names, or ValueProblem if the bridge does not know it."""
        target = self.find(container_id)
        if target is None:
            raise ValueProblem(where, f"unknown container {container_id[:80]!r}")
        return target

    def bound(self, container_id: str, where: str) -> ReplyTarget:
        """The target `container_id` names, known and inside the webhook's selector."""
        target = self.known(container_id, where)
        self.in_selector(container_id, target, where)
        return target

    def in_selector(self, container_id: str, target: ReplyTarget, where: str) -> None:
        """WebhookFailure(DISALLOWED) naming the container and its pod unless the webhook's
        selector matches the target's pod."""
        if not self.selector.matches(target.pod):
            pod = target.pod
            whose = (f"pod namespace {pod.namespace[:80]!r}, pod {pod.name[:80]!r}"
                     if pod is not None else "pod not known")
            raise WebhookFailure(FailureKind.DISALLOWED, f"{where}: container "
                                 f"{container_id[:80]!r} ({whose}) is outside the webhook's "
                                 "selector")


def parse_reply(data: Any, webhook: str, scope: Scope) -> Contribution:
    if not isinstance(data, dict):
        raise WebhookFailure(FailureKind.SCHEMA, "reply: expected a JSON object")
    allowed = REPLY_KEYS[scope.event]
    present = {k: v for k, v in data.items() if v is not None}
    for key in present:
        if key not in allowed:
            raise WebhookFailure(FailureKind.SCHEMA, f"reply.{key}: not allowed for "
                                 f"{scope.event} (allowed: {', '.join(allowed)})")
    walk = ReplyWalk()
    try:
        adjust = _adjust(present["adjust"], scope, walk) if "adjust" in present else None
        updates = (parse_updates(present["update"], scope, "update", walk)
                   if "update" in present else ())
        evictions = _evictions(present.get("evict"), scope)
        reject = _reject(present.get("reject"))
        warnings = _warnings(present.get("warnings"))
    except ConversionError as exc:
        raise WebhookFailure(FailureKind.SCHEMA, str(exc)) from None
    except ValueProblem as exc:
        raise WebhookFailure(FailureKind.INVALID, str(exc)) from None
    return Contribution(webhook, adjust, updates, evictions, reject, warnings, walk)


def _adjust(data: Any, scope: Scope, walk: ReplyWalk) -> api.ContainerAdjustment | None:
    adjust = nri_adjustment_from_json(data, "adjust")
    _check_part(walk.adjustment(adjust), scope.allow, "adjust")
    check_adjustment(adjust, scope.allow, scope.target, scope.hugepages)
    _in_node(adjust.linux, scope, "adjust")
    return adjust if adjust.ByteSize() else None


def parse_updates(items: Any, scope: Scope, path: str, walk: ReplyWalk | None = None,
                  ) -> tuple[api.ContainerUpdate, ...]:
    """Container updates from JSON (also the control API's POST /v1/updates).

    Raises ConversionError for shape problems, ValueProblem for values and unknown
    targets, WebhookFailure(DISALLOWED) for kinds and items outside `scope.allow` and for
    targets outside `scope.selector`.
    """
    if not isinstance(items, list):
        raise ConversionError(path, "expected a list")
    walk = walk if walk is not None else ReplyWalk()
    out: list[api.ContainerUpdate] = []
    for i, item in enumerate(items):
        where = f"{path}[{i}]"
        if isinstance(item, dict):
            unknown = set(item) - _UPDATE_KEYS
            if unknown:
                raise ConversionError(f"{where}.{sorted(unknown)[0]}", "unknown field")
        update = from_json(item, api.ContainerUpdate, where)
        assert isinstance(update, api.ContainerUpdate)
        cid = update.container_id
        if not cid:
            raise ConversionError(f"{where}.container_id", "required")
        if cid == scope.creating:
            raise ValueProblem(f"{where}.container_id", "is the container being created; "
                               "change it with `adjust` instead")
        target = scope.known(cid, f"{where}.container_id")
        _check_part(walk.update(update, where), scope.allow, where)
        scope.in_selector(cid, target, f"{where}.container_id")
        check_update(update, scope.allow, target, scope.hugepages, where)
        _in_node(update.linux, scope, where)
        out.append(update)
    return tuple(out)


def _in_node(linux: api.LinuxContainerAdjustment | api.LinuxContainerUpdate, scope: Scope,
             where: str) -> None:
    """ValueProblem for a cpuset outside the node's CPUs or memory nodes (node_cpusets)."""
    if linux.HasField("resources") and linux.resources.HasField("cpu"):
        cpu = linux.resources.cpu
        if cpu.cpus or cpu.mems:
            check_node_cpuset(linux.resources, scope.node_cpus(), f"{where}.linux.resources")


def _check_part(part: Part, allow: frozenset[str], path: str) -> None:
    """The allow list first (a refused kind is named even if its value is bad too), then
    the first bad value."""
    refused = part.kinds - allow
    if refused:
        raise WebhookFailure(FailureKind.DISALLOWED, f"{path}: {', '.join(sorted(refused))} "
                             f"not in the webhook's allow list ({', '.join(sorted(allow))})")
    if part.problem is not None:
        raise part.problem


def _evictions(data: Any, scope: Scope) -> tuple[api.ContainerEviction, ...]:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ConversionError("evict", "expected a list")
    out = []
    for i, item in enumerate(data):
        eviction = from_json(item, api.ContainerEviction, f"evict[{i}]")
        assert isinstance(eviction, api.ContainerEviction)
        if not eviction.container_id:
            raise ConversionError(f"evict[{i}].container_id", "required")
        scope.bound(eviction.container_id, f"evict[{i}].container_id")
        out.append(eviction)
    return tuple(out)


def _reject(data: Any) -> str | None:
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) - {"reason"}:
        raise ConversionError("reject", "expected {\"reason\": \"...\"}")
    reason = data.get("reason")
    if not isinstance(reason, str) or not _REASON.search(reason):
        raise ConversionError("reject.reason", "expected a non-empty string")
    return reason[:MAX_REASON_CHARS]  # the contract's length: cut, as the schema says


def _warnings(data: Any) -> tuple[str, ...]:
    if data is None:
        return ()
    if not isinstance(data, list) or not all(isinstance(w, str) for w in data):
        raise ConversionError("warnings", "expected a list of strings")
    if len(data) > MAX_WARNINGS:
        raise ConversionError("warnings", f"more than {MAX_WARNINGS} entries")
    return tuple(w[:MAX_WARNING_CHARS] for w in data)  # cut, as the schema says
