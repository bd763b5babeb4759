"""Reply fields that crash a runtime, by the NRI version it embeds.

A runtime ignores the fields its NRI version does not know (bridge.contract.capabilities). Some
fields it knows it cannot take: merging them panics the runtime process, and with it every
container operation on the node. Each row of HAZARDS names the field (its path, as in
bridge.contract.adjustment_fields), the NRI versions that have the bug ([first, fixed)), what
sets it off, the panic, and where in NRI's source it happens. The audit behind the table (every
map a plugin's reply writes, per supported NRI version) is
docs/protocol.md#reply-fields-that-crash-a-runtime.

From this table the bridge drops such fields from every reply before merging and reports them
as dropped (bridge.webhooks.webhook_handler), `runtime.capabilities` leaves them out
(bridge.contract.capabilities), and the simulator's profiles crash on them
(bridge.runtime_facts.profiles, bridge.simulator.result_merge), so a bridge that lets one
through fails its tests with a crashed runtime instead of a silently applied field.

An unknown NRI version counts as affected: a runtime that does not report its version is older
than v0.12.0 (the first to report it, docs/protocol.md#registration) unless it is a development
build, and a field costs less than the node.

Owns: the table and the questions asked of it (which rows affect a version, whether a message
sets one off). Must not: log, count or edit replies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from bridge.contract.adjustment_fields import FIELD_PATHS
from bridge.contract.nri_version import Version


@dataclass(frozen=True, slots=True)
class Hazard:
    """One reply field that crashes runtimes with NRI versions in [first, fixed)."""

    path: str  # the field, as in FIELD_PATHS (`linux.sysctl`)
    first: Version  # the first NRI version with the bug
    fixed: Version  # the first NRI version without it
    trigger: str  # what in a reply sets it off
    panic: str  # what the runtime dies with
    upstream: str  # where, in NRI's source (cited, not copied)

    def affects(self, nri: Version | None) -> bool:
        return nri is None or self.first <= nri < self.fixed

    def set_off_by(self, msg: Message) -> bool:
        """Whether `msg` (a ContainerAdjustment) carries what sets this hazard off: a map entry
        added under `path` (a key without NRI's "-" removal marker), or any value of a field
        that is not a map."""
        value = value_at(msg, self.path)
        if value is None:
            return False
        if hasattr(value, "keys"):  # a protobuf map
            return any(not str(key).startswith("-") for key in value)
        return True


HAZARDS: tuple[Hazard, ...] = (
    Hazard(
        path="linux.sysctl",
        first=(0, 11, 0),
        fixed=(0, 12, 0),
        trigger="a sysctl added (any key without the '-' removal marker), whatever sysctls "
                "the container already has",
        panic="panic: assignment to entry in nil map",
        upstream="NRI v0.11.0 pkg/adaptation/result.go (*result).adjustSysctl writes every "
                 "added key into the merged reply's Linux.Sysctl, a map "
                 "collectCreateContainerResult never creates (nor the container's own when it "
                 "has no sysctls); fixed in v0.12.0 by a7dd8b0 (\"adaptation: initialize sysctl "
                 "map before collecting results\")",
    ),
)
for _row in HAZARDS:
    assert _row.path in FIELD_PATHS, f"hazard for an unknown field {_row.path!r}"


def hazards_for(nri: Version | None) -> tuple[Hazard, ...]:
    """The rows that affect a runtime with NRI version `nri` (all of them if unknown)."""
    return tuple(row for row in HAZARDS if row.affects(nri))


def value_at(msg: Message, path: str) -> Any:
    """The value of the field at dotted `path` in `msg`, or None if it is not set (protobuf's
    ListFields: a present sub-message, a non-empty map or list, a scalar that is not zero)."""
    for part in path.split("."):
        found = [value for fd, value in msg.ListFields() if fd.name == part]
        if not found:
            return None
        msg = found[0]
    return msg


def clear_at(msg: Message, path: str) -> None:
    """Clear the field at dotted `path` in `msg`, and the sub-messages it leaves empty."""
    *parents, name = path.split(".")
    chain = [msg]
    for part in parents:
        if not chain[-1].HasField(part):
            return
        chain.append(getattr(chain[-1], part))
    chain[-1].ClearField(name)
    for parent, part in zip(reversed(chain[:-1]), reversed(parents), strict=True):
        if getattr(parent, part).ByteSize():
            break
        parent.ClearField(part)
