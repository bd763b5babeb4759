"""Taking the fields that would crash the connected runtime out of a checked contribution.

Some reply fields panic the runtime that merges them (bridge.contract.runtime_hazards, e.g.
any added sysctl on NRI v0.11.x). Unlike a field the runtime merely ignores, such a field must
never reach it, so it is removed from the webhook's contribution before the merge: the
container is created without it, and the handler (bridge.webhooks.webhook_handler) warns and
counts it as dropped. The whole field goes, removals included (on v0.11.x a sysctl removal does not
remove a sysctl either: docs/protocol.md#reply-fields-that-crash-a-runtime).

The connected runtime's rows are derived once per connection
(bridge.contract.capabilities.ConnectedRuntime.hazards); a contribution that sets none of them is
returned as it is. One that does is copied without them and walked again (its claims must not
hold fields that never reach the runtime): the one case of a second walk, on NRI v0.11.x only.

Owns: the copy of a contribution without those fields. Must not: log, count, or decide which
fields are hazardous (the contract's table does).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from google.protobuf.message import Message

from bridge.contract.runtime_hazards import Hazard, clear_at, value_at
from bridge.webhooks.guard import Contribution

M = TypeVar("M", bound=Message)


def without_hazards(c: Contribution, hazards: tuple[Hazard, ...],
                    ) -> tuple[Contribution, tuple[Hazard, ...]]:
    """`c` without the fields of `hazards` (the connected runtime's rows), and the rows of the
    fields taken out (none: `c` itself)."""
    if not hazards:
        return c, ()
    used = c.walked.used
    rows = tuple(row for row in hazards if row.path in used)
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
