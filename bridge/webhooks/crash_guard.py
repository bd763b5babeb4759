"""Taking the fields that would crash the connected runtime out of a checked contribution.

Some reply fields panic the runtime that merges them (bridge.contract.runtime_hazards, e.g.
any added sysctl on NRI v0.11.x). Unlike a field the runtime merely ignores, such a field must
never reach it, so it is removed from the webhook's contribution before the merge: the
container is created without it, and the handler (bridge.webhooks.call_sequence) warns and counts it
as dropped. The whole field goes, removals included (on v0.11.x a sysctl removal does not
remove a sysctl either: docs/protocol.md#reply-fields-that-crash-a-runtime).

Owns: the copy of a contribution without those fields. Must not: log, count, or decide which
fields are hazardous (the contract's table does).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from google.protobuf.message import Message

from bridge.contract.nri_version import Version
from bridge.contract.runtime_hazards import Hazard, clear_at, hazards_for, value_at
from bridge.webhooks.guard import Contribution

M = TypeVar("M", bound=Message)


def without_hazards(c: Contribution, nri: Version | None,
                    ) -> tuple[Contribution, tuple[Hazard, ...]]:
    """`c` without the fields that would crash a runtime with NRI version `nri`, and the rows
    of the fields taken out (none: `c` itself)."""
    rows = tuple(row for row in hazards_for(nri) if row.path in c.walked.used)
    if not rows:
        return c, ()
    adjust = _cleared(c.adjust, rows) if c.adjust is not None else None
    updates = tuple(_cleared(u, rows) for u in c.updates)
    return replace(c, adjust=adjust if adjust is not None and adjust.ByteSize() else None,
                   updates=updates, walk=None), rows  # walk=None: walked again, without them


def _cleared(msg: M, rows: tuple[Hazard, ...]) -> M:
    copy = type(msg)()
    copy.CopyFrom(msg)
    for row in rows:
        if value_at(copy, row.path) is not None:
            clear_at(copy, row.path)
    return copy
