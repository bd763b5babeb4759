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

A connection's runtime does not change until it reconnects, so what is asked of the table for
it is answered once, at Configure: `ConnectedRuntime` holds the runtime's hazards, the leaves it
ignores per route, its capabilities and the envelope's `runtime` object, and an event's check is
set lookups on the leaf paths the reply walk found (bridge.webhooks.reply_walk).

Owns: the questions asked of the table by the envelope and the dropped-field warning, answered
once per runtime. Must not: log or count (the webhook handler does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from bridge.contract.field_table import LEAVES
from bridge.contract.nri_version import Version, format_version
from bridge.contract.runtime_effects import Effect, Route, Runtime, applied_leaves, effect_of
from bridge.contract.runtime_hazards import Hazard, hazards_for

# The routes of an event's reply: its adjustment and its updates (bridge.contract.runtime_effects).
REPLY_ROUTES = (Route.ADJUST, Route.UPDATE)


def capabilities(nri: Version | None, name: str = "", version: str = "") -> tuple[str, ...] | None:
    """The leaves a runtime (`name`, NRI version `nri`) applies in an adjustment; None if its
    NRI version is unknown."""
    if nri is None:
        return None
    return tuple(sorted(leaf.path for leaf in applied_leaves(Route.ADJUST,
                                                               Runtime(name, version, nri))))


@dataclass(frozen=True, slots=True)
class ConnectedRuntime:
    """What the table says of one runtime, derived once (`connected`): fixed for a connection."""

    runtime: Runtime
    hazards: tuple[Hazard, ...]  # the fields that crash it (runtime_hazards.hazards_for)
    hazard_paths: frozenset[str]
    # Per reply route, the table's leaves it silently ignores (a leaf outside the table is
    # ignored too, `ignores`); empty when its NRI version is unknown: nothing to say.
    ignored: Mapping[Route, frozenset[str]]
    envelope: Mapping[str, Any]  # the envelope's `runtime` object (runtime_ref)

    def ignores(self, paths: Iterable[str], route: Route) -> set[str]:
        """The leaf paths of `paths` this runtime silently ignores by `route`."""
        if self.runtime.nri is None:
            return set()
        ignored = self.ignored[route]
        return {p for p in paths if p in ignored or p not in LEAVES}

    def dropped(self, adjust_leaves: Iterable[str], update_leaves: Iterable[str]) -> list[str]:
        """The leaves of an event's reply (its adjustment's, its updates') this runtime would
        silently ignore, sorted (those that would crash it are `hazards`: the bridge drops
        them itself)."""
        return sorted(self.ignores(adjust_leaves, Route.ADJUST)
                      | self.ignores(update_leaves, Route.UPDATE))


@lru_cache(maxsize=64)
def connected(name: str, version: str, nri: Version | None) -> ConnectedRuntime:
    """The table's answers for the runtime `name` `version` with NRI version `nri` (cached:
    a bridge meets a handful of runtimes in its life, one per connection)."""
    runtime = Runtime(name, version, nri)
    hazards = hazards_for(nri)
    ignored = MappingProxyType({route: frozenset(
        path for path in LEAVES if effect_of(path, route, runtime).effect is Effect.IGNORED)
        for route in REPLY_ROUTES} if nri is not None else {r: frozenset() for r in REPLY_ROUTES})
    caps = capabilities(nri, name, version)
    envelope = MappingProxyType({"name": name, "version": version,
                                 "nri_version": None if nri is None else format_version(nri),
                                 "capabilities": caps})
    return ConnectedRuntime(runtime, hazards, frozenset(h.path for h in hazards), ignored,
                            envelope)


def runtime_ref(name: str, version: str, nri: Version | None) -> dict[str, Any]:
    """The envelope's `runtime` object."""
    ref = connected(name, version, nri).envelope
    return {**ref, "capabilities": None if ref["capabilities"] is None
            else list(ref["capabilities"])}
