"""What a runtime applies of a reply: `runtime.capabilities` and the dropped fields.

A runtime silently ignores some leaves of a reply: those its NRI version does not know
(docs/protocol.md#what-each-nri-version-added) and those it knows but does not apply on that
route (`memory.swappiness` in an adjustment, `pids` in an UpdateContainer reply). Both come from
the one field table (bridge.contract.field_table, bridge.contract.runtime_effects). So the
envelope tells a policy which leaves the connected runtime applies in an adjustment
(`runtime.capabilities`), and the bridge warns and counts when a policy sets a leaf that
runtime would ignore. A field that would crash the runtime (bridge.contract.runtime_hazards)
is not a capability either: the bridge drops it itself.

Leaves are named by their path in ContainerAdjustment / ContainerUpdate, as in the webhook JSON
(`linux.resources.memory.limit`, `linux.resources.pids`, `CDI_devices`, `args`); a removal of
an entry counts as using the field.

Owns: the questions asked of the table by the envelope and the dropped-field warning. Must not:
log or count (the webhook handler does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bridge.contract.applied_view import set_leaves
from bridge.contract.nri_version import Version, format_version
from bridge.contract.runtime_effects import Route, Runtime, applied_leaves, ignored
from bridge.proto.nri import api_pb2 as api


def capabilities(nri: Version | None, name: str = "", version: str = "") -> tuple[str, ...] | None:
    """The leaves a runtime (`name`, NRI version `nri`) applies in an adjustment; None if its
    NRI version is unknown."""
    if nri is None:
        return None
    return tuple(sorted(leaf.path for leaf in applied_leaves(Route.ADJUST,
                                                               Runtime(name, version, nri))))


def runtime_ref(name: str, version: str, nri: Version | None) -> dict[str, Any]:
    """The envelope's `runtime` object."""
    caps = capabilities(nri, name, version)
    return {"name": name, "version": version,
            "nri_version": None if nri is None else format_version(nri),
            "capabilities": None if caps is None else list(caps)}


def dropped_fields(runtime: Runtime, adjust: api.ContainerAdjustment | None,
                   updates: Iterable[api.ContainerUpdate] = ()) -> list[str]:
    """The leaves of an event's reply `runtime` would silently ignore (those that would crash
    it are in runtime_hazards.hazards_for: the bridge drops them itself)."""
    if runtime.nri is None:
        return []  # unknown runtime: nothing to say (the envelope says capabilities: null)
    out: set[str] = set()
    if adjust is not None:
        out.update(ignored(set_leaves(adjust), Route.ADJUST, runtime))
    for update in updates:
        out.update(ignored(set_leaves(update), Route.UPDATE, runtime))
    return sorted(out)
