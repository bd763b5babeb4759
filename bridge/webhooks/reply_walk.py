"""One pass over what a reply asks for: kinds, claims, field paths and values, together.

Owns: the walk over a reply's ContainerAdjustment and ContainerUpdates by the field table
(bridge.contract.adjustment_fields). Passing each set field once, it collects
- the allow-list kinds the part touches (removals count);
- the merge's claims, one per (container, field, key), and the first claim set twice;
- the field paths set (`used`: the crash guard's question, bridge.webhooks.crash_guard) and the
  leaf paths set per route (`adjust_leaves`, `update_leaves`: the dropped-field check,
  contract.capabilities.ConnectedRuntime.dropped, asks nothing else of the reply);
- the first value problem (bridge.webhooks.values.CHECKS, one check per field).
Must not: decide what a finding means — the guard refuses kinds and values
(bridge.webhooks.guard), the merge refuses conflicts and double sets
(bridge.webhooks.reply_merge), the handler warns about dropped fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from google.protobuf.message import Message

from bridge.contract.adjustment_fields import (
    ADJUSTMENT_FIELDS,
    RESOURCE_FIELDS,
    SUBTABLES,
    FieldRule,
    Owner,
    rule_of,
)
from bridge.contract.field_table import leaf_paths
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.values import CHECKS, ValueProblem

CREATED = ""  # the container an adjustment applies to

# (container id, field, key); key is "" for single-owner fields.
Claim = tuple[str, str, str]

def describe_claim(claim: Claim) -> str:
    container, name, key = claim
    text = f"{name} {key!r}" if key else name
    return text if container == CREATED else f"{text} of container {container[:16]}"


@dataclass(slots=True)
class Part:
    """What one part of a reply (its adjustment, or one update) touches."""

    kinds: set[str] = field(default_factory=set)
    problem: ValueProblem | None = None  # the first value that failed its check


@dataclass(slots=True)
class ReplyWalk:
    """Accumulates one reply's parts: its adjustment first, then its updates in order."""

    claims: set[Claim] = field(default_factory=set)
    duplicate: Claim | None = None  # the first claim the reply sets (not removes) twice
    used: set[str] = field(default_factory=set)  # field paths set, e.g. linux.resources.pids
    # The leaf paths set (bridge.contract.field_table), by route: e.g. linux.resources.cpu.shares
    adjust_leaves: set[str] = field(default_factory=set)
    update_leaves: set[str] = field(default_factory=set)
    _set: set[Claim] = field(default_factory=set)

    def adjustment(self, adjust: api.ContainerAdjustment, where: str = "adjust") -> Part:
        part = Part()
        self._walk(adjust, ADJUSTMENT_FIELDS, "", f"{where}.", CREATED, part,
                   self.adjust_leaves)
        return part

    def update(self, update: api.ContainerUpdate, where: str) -> Part:
        part = Part()
        for fd, value in update.linux.ListFields():
            if fd.name == "resources":
                self._walk(value, RESOURCE_FIELDS, "linux.resources.",
                           f"{where}.linux.resources.", update.container_id, part,
                           self.update_leaves)
            else:  # a LinuxContainerUpdate field newer than this bridge
                self.used.add(f"linux.{fd.name}")
        return part

    def _walk(self, msg: Message, table: Mapping[str, FieldRule], prefix: str, where: str,
              container: str, part: Part, leaves: set[str]) -> None:
        for fd, value in msg.ListFields():
            name = fd.name
            rule = rule_of(table, name)
            owner = rule.owner
            if owner is Owner.WALKED:
                self._walk(value, SUBTABLES[name], f"{prefix}{name}.", f"{where}{name}.",
                           container, part, leaves)
                continue
            path = prefix + name
            part.kinds.add(rule.kind)
            self.used.add(path)
            leaves.update(leaf_paths(path, value))
            claimed = name.lower()  # CDI_devices is claimed as cdi_devices
            if owner is Owner.SINGLE:
                self._claim((container, claimed, ""), False)
            elif owner is Owner.MAP:
                for key in value:
                    self._keyed(container, claimed, key, rule)
            elif owner is Owner.ENTRY:
                for entry in value:
                    self._keyed(container, claimed, str(getattr(entry, rule.key)), rule)
            elif owner is Owner.NESTED:
                for sub, _ in value.ListFields():
                    self._claim((container, f"{claimed}.{sub.name}", ""), False)
            # Owner.APPEND (hooks, cgroup device rules): never conflicts, claims nothing.
            if part.problem is None:
                check = CHECKS.get(path)
                if check is not None:
                    try:
                        check(value, where + name)
                    except ValueProblem as problem:
                        part.problem = problem

    def _keyed(self, container: str, name: str, key: str, rule: FieldRule) -> None:
        if rule.removable and key.startswith("-"):
            self._claim((container, name, key[1:]), True)
        else:
            self._claim((container, name, key), False)

    def _claim(self, claim: Claim, removal: bool) -> None:
        if not removal:
            if claim in self._set and self.duplicate is None:
                self.duplicate = claim
            self._set.add(claim)
        self.claims.add(claim)
