"""Which adjustment fields a runtime applies, by the NRI version it embeds.

A runtime ignores fields its NRI version does not know: an adjustment that uses
them is silently dropped, with no error (docs/protocol.md#what-each-nri-version-added). So the
envelope tells a policy what the connected runtime applies (`runtime.capabilities`), and the
bridge warns and counts when a policy sets a field that runtime would drop.

Fields are named by their path in ContainerAdjustment / ContainerUpdate, as in
the webhook JSON (`linux.resources.pids`, `CDI_devices`, `args`); a removal of an
entry counts as using the field. The first NRI version of each field is a column
of bridge.contract.adjustment_fields (from the message reference, docs/protocol.md#messages,
docs/protocol.md#what-each-nri-version-added).

Owns: the questions asked of that column. Must not: log or count
(the webhook handler does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from google.protobuf.message import Message

from bridge.contract.adjustment_fields import FIELD_PATHS, WALKED_PATHS
from bridge.contract.nri_version import Version, format_version
from bridge.proto.nri import api_pb2 as api

# Adjustment field path -> first NRI version whose runtimes apply it (the `since` column of
# bridge.contract.adjustment_fields, the one list of adjustable fields).
FIELD_SINCE: Mapping[str, Version] = MappingProxyType({
    path: rule.since for path, rule in FIELD_PATHS.items()
})
# A path with no row (a proto field newer than the table) is assumed not applied: warn.
_UNKNOWN: Version = (99, 0, 0)


def capabilities(nri: Version | None) -> tuple[str, ...] | None:
    """The adjustment fields a runtime with NRI version `nri` applies; None if unknown."""
    if nri is None:
        return None
    return tuple(sorted(path for path, since in FIELD_SINCE.items() if since <= nri))


def runtime_ref(name: str, version: str, nri: Version | None) -> dict[str, Any]:
    """The envelope's `runtime` object."""
    caps = capabilities(nri)
    return {"name": name, "version": version,
            "nri_version": None if nri is None else format_version(nri),
            "capabilities": None if caps is None else list(caps)}


def fields_used(adjust: api.ContainerAdjustment | None,
                updates: Sequence[api.ContainerUpdate] = ()) -> set[str]:
    """Every field path an adjustment and updates set (present sections count)."""
    used: set[str] = set()
    if adjust is not None:
        _collect(adjust, "", used)
    for update in updates:
        if update.HasField("linux"):
            _collect(update.linux, "linux.", used)
    return used


def dropped_fields(used: set[str], nri: Version | None) -> list[str]:
    """The fields in `used` a runtime with NRI version `nri` would silently drop."""
    if nri is None:
        return []  # unknown runtime: nothing to say (the envelope says capabilities: null)
    return sorted(p for p in used if FIELD_SINCE.get(p, _UNKNOWN) > nri)


def _collect(msg: Message, prefix: str, used: set[str]) -> None:
    for field, value in msg.ListFields():
        path = prefix + field.name
        if path in WALKED_PATHS:
            _collect(value, path + ".", used)
        else:
            used.add(path)
