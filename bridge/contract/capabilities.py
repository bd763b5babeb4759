"""Which adjustment fields a runtime applies, by the NRI version it embeds.

A runtime ignores fields its NRI version does not know: an adjustment that uses
them is silently dropped, with no error (docs/protocol.md#what-each-nri-version-added). So the
envelope tells a policy what the connected runtime applies (`runtime.capabilities`), and the
bridge warns and counts when a policy sets a field that runtime would drop. A field that would
crash the runtime (bridge.contract.runtime_hazards) is not a capability either: the bridge drops
it itself.

Fields are named by their path in ContainerAdjustment / ContainerUpdate, as in
the webhook JSON (`linux.resources.pids`, `CDI_devices`, `args`); a removal of an
entry counts as using the field. The first NRI version of each field is a column
of bridge.contract.adjustment_fields (from the message reference, docs/protocol.md#messages,
docs/protocol.md#what-each-nri-version-added).

Owns: the questions asked of that column. Must not: log or count
(the webhook handler does), or walk replies (the field paths a reply sets come from the
reply walk, bridge.webhooks.reply_walk).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from bridge.contract.adjustment_fields import FIELD_PATHS
from bridge.contract.nri_version import Version, format_version
from bridge.contract.runtime_hazards import hazards_for

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
    hazardous = {row.path for row in hazards_for(nri)}
    return tuple(sorted(path for path, since in FIELD_SINCE.items()
                        if since <= nri and path not in hazardous))


def runtime_ref(name: str, version: str, nri: Version | None) -> dict[str, Any]:
    """The envelope's `runtime` object."""
    caps = capabilities(nri)
    return {"name": name, "version": version,
            "nri_version": None if nri is None else format_version(nri),
            "capabilities": None if caps is None else list(caps)}


def dropped_fields(used: set[str], nri: Version | None) -> list[str]:
    """The fields in `used` a runtime with NRI version `nri` would silently drop (those that
    would crash it are in runtime_hazards.hazards_for: the bridge drops them itself)."""
    if nri is None:
        return []  # unknown runtime: nothing to say (the envelope says capabilities: null)
    return sorted(p for p in used if FIELD_SINCE.get(p, _UNKNOWN) > nri)
