"""What each runtime does with each leaf of a reply, per route: the runtime half of the one table.

A runtime applies a reply per leaf (bridge.contract.field_table) and per route, and NRI's
message says nothing of it: containerd 2.1.9 takes `memory.limit` from an adjustment, sets
swap to it, and ignores `memory.swappiness` without a word (the `lab` facts below). Routes:

- `adjust`: the merged ContainerAdjustment of CreateContainer (NRI's OCI generator,
  pkg/runtime-tools/generate/generate.go `Adjust`);
- `update`: the updates in an event's reply: an UpdateContainer reply (kubelet's in-place
  resize, CRI UpdateContainerResources) and other containers' updates in any event's reply;
  they pass NRI's merge, which never copies `pids` (pkg/adaptation/result.go updateResources
  reads it from the merged copy, not from the plugin's update);
- `update_containers`: a plugin's unsolicited NRI UpdateContainers (and Synchronize's
  updates), which no merge touches;
- `cri_update`: the bridge's unsolicited update sent as CRI UpdateContainerResources (the route
  it takes where UpdateContainers can deadlock,
  docs/protocol.md#unsolicited-updates-and-the-runtimes-locks): CRI carries only
  bridge.contract.cri_service.CARRIED, and the runtime runs its UpdateContainer event and
  applies the result as it applies an `update`.

`FACTS` are the exceptions, each with its source: `lab` (measured on containerd 1.7.24, 2.2.7,
2.3.4 and CRI-O 1.36.3 on cgroup v1, each runtime's config.json and cgroup files read back),
`upstream` (a source file, cited, never copied), `assumed` (CRI-O is not mirrored here: where
the lab said nothing, it is assumed to keep no more than containerd). Rules, in order:
a leaf a ContainerUpdate cannot hold is `absent` on the update routes; `cri_update` ignores what
CRI cannot carry; a leaf newer than the runtime's NRI is ignored (it cannot decode it); a
hazard (bridge.contract.runtime_hazards) crashes the runtime; the first matching fact; else
applied. A runtime that is neither containerd nor CRI-O is assumed to be containerd (the
stricter one); an unknown NRI version matches every version range (as the hazards do).

Owns: the facts and `effect_of`. Must not: edit messages (bridge.contract.applied_view does),
log, count or know the simulator's profiles.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from bridge.contract.cri_service import CARRIED
from bridge.contract.field_table import LEAVES, RESOURCES, Leaf
from bridge.contract.nri_version import Version, format_version, plugin_updates_can_deadlock
from bridge.contract.runtime_hazards import hazards_for

NEVER: Version = (999, 0, 0)


class Route(Enum):
    ADJUST = "adjust"
    UPDATE = "update"
    UPDATE_CONTAINERS = "update_containers"
    CRI_UPDATE = "cri_update"


ROUTE_PHRASES = {
    Route.ADJUST: "an adjustment",
    Route.UPDATE: "an UpdateContainer reply",
    Route.UPDATE_CONTAINERS: "an UpdateContainers request",
    Route.CRI_UPDATE: "an unsolicited update (CRI UpdateContainerResources)",
}


class Effect(Enum):
    APPLIED = "applied"
    IGNORED = "ignored"
    SWAP_IS_LIMIT = "swap = limit"  # applied, and memory.swap set to the same value
    REMOVAL_LOST = "removal lost"  # additions applied; a lone removal removes nothing
    CRASHES = "crashes"  # the runtime panics (bridge.contract.runtime_hazards)
    ABSENT = "n/a"  # the route's message cannot hold the leaf


@dataclass(frozen=True, slots=True)
class Runtime:
    """A runtime as a plugin sees it: its name and version (Configure) and its NRI version."""

    name: str
    version: str
    nri: Version | None

    @property
    def family(self) -> str:
        name = self.name.strip().lower()
        return "cri-o" if name in ("cri-o", "crio") else "containerd"

    @property
    def label(self) -> str:
        # "containerd 2.1.9", not "2.1.9+unknown" or "1.7.24~ds1" (distribution suffixes).
        version = self.version.lstrip("v").split("+", 1)[0].split("~", 1)[0]
        return f"{self.name} {version}".strip()

    @property
    def unsolicited(self) -> Route:
        """The route the bridge's unsolicited updates take on this runtime (bridge.nri)."""
        if plugin_updates_can_deadlock(self.name, self.nri):
            return Route.CRI_UPDATE
        return Route.UPDATE_CONTAINERS


@dataclass(frozen=True, slots=True)
class Fact:
    leaves: tuple[str, ...]
    routes: frozenset[Route]
    effect: Effect
    families: frozenset[str]
    source: str  # "lab", "upstream", "assumed"
    why: str
    first: Version = (0, 0, 0)
    fixed: Version = NEVER

    def matches(self, leaf: str, route: Route, runtime: Runtime) -> bool:
        nri = runtime.nri
        return (leaf in self.leaves and route in self.routes
                and runtime.family in self.families
                and (nri is None or self.first <= nri < self.fixed))


@dataclass(frozen=True, slots=True)
class Verdict:
    effect: Effect
    source: str
    why: str


def _r(*names: str) -> tuple[str, ...]:
    return tuple(RESOURCES + name for name in names)


BOTH = frozenset({"containerd", "cri-o"})
CONTAINERD = frozenset({"containerd"})
CRIO = frozenset({"cri-o"})
ADJUST = frozenset({Route.ADJUST})
UPDATE = frozenset({Route.UPDATE})
UPDATES = frozenset({Route.UPDATE, Route.UPDATE_CONTAINERS})
UPDATE_CONTAINERS = frozenset({Route.UPDATE_CONTAINERS})
CRI_UPDATE = frozenset({Route.CRI_UPDATE})
_GENERATOR = ("NRI pkg/runtime-tools/generate/generate.go AdjustResources reads only "
              "memory.limit and sets it as both the limit and the swap limit")
_TO_CRI = ("containerd internal/cri/nri/nri_api_linux.go toCRIResources copies only the memory "
           "limit, the CPU shares, quota, period, cpus and mems, hugepages and unified")
_SWAP_IS_LIMIT = ("containerd internal/cri/opts/spec_linux_opts.go WithResources sets swap to "
                  "the limit when the request has none (toCRIResources never has one)")
_MEMORY_IGNORED = _r("memory.reservation", "memory.swap", "memory.swappiness")
_MEMORY_OTHERS = _r("memory.kernel", "memory.kernel_tcp", "memory.disable_oom_killer",
                    "memory.use_hierarchy")
_UPDATE_IGNORED = _r("memory.swap", "cpu.realtime_runtime", "cpu.realtime_period",
                     "blockio_class", "rdt_class", "devices") + _MEMORY_OTHERS
# The versions whose merge turns a lone sysctl removal into an annotation removal.
SYSCTL_REMOVAL_LOST = ((0, 11, 0), (0, 12, 3))

FACTS: tuple[Fact, ...] = (
    # -- adjust (CreateContainer) --------------------------------------------------------
    Fact(_r("memory.limit"), ADJUST, Effect.SWAP_IS_LIMIT, BOTH, "lab",
         "lab note L1 (every runtime: swap = limit in config.json); " + _GENERATOR),
    Fact(_MEMORY_IGNORED, ADJUST, Effect.IGNORED, BOTH, "lab",
         "lab note L1 (every runtime); " + _GENERATOR),
    Fact(_MEMORY_OTHERS, ADJUST, Effect.IGNORED, BOTH, "upstream", _GENERATOR),
    Fact(_r("devices"), ADJUST, Effect.IGNORED, BOTH, "upstream",
         "NRI generate.go AdjustResources reads cgroup device rules (r.Devices) from v0.10.0",
         fixed=(0, 10, 0)),
    Fact(("linux.sysctl",), ADJUST, Effect.REMOVAL_LOST, BOTH, "lab",
         "lab note L3 (containerd 2.2.7, 2.3.4: the sysctl stays, an annotation of that name "
         "goes); NRI v0.11.0-v0.12.2 pkg/adaptation/result.go adjustSysctl records a lone "
         "removal as Annotations[\"-key\"], fixed after v0.12.2",
         first=SYSCTL_REMOVAL_LOST[0], fixed=SYSCTL_REMOVAL_LOST[1]),
    # -- update (UpdateContainer reply) and update_containers ----------------------------
    Fact(_r("memory.limit"), UPDATES, Effect.SWAP_IS_LIMIT, CONTAINERD, "upstream",
         "lab note L2 (limit applied); " + _TO_CRI + "; " + _SWAP_IS_LIMIT),
    Fact(_r("memory.limit"), UPDATES, Effect.APPLIED, CRIO, "lab",
         "lab note L2 (CRI-O 1.36.3: limit applied, swap left at its old value)"),
    Fact(_r("pids", "memory.reservation"), UPDATE_CONTAINERS, Effect.APPLIED, CRIO, "lab",
         "lab note L2: CRI-O 1.36.3 applied pids and the memory reservation (soft limit) "
         "of an unsolicited update"),
    Fact(_r("pids"), UPDATE, Effect.IGNORED, BOTH, "upstream",
         "lab note L2 (dropped on every runtime); NRI pkg/adaptation/result.go "
         "updateResources takes pids from the merged copy, never from a plugin's update"),
    # -- cri_update (the bridge's unsolicited update as CRI UpdateContainerResources) ---------
    Fact(_r("memory.swap"), CRI_UPDATE, Effect.APPLIED, CONTAINERD, "lab",
         "lab: e2e differential (tests/e2e/test_field_differential.py), containerd 1.7.24 and "
         "2.1.9, 2026-11-28: the CRI request's memory_swap_limit_in_bytes reaches config and "
         "memory.memsw.limit_in_bytes when no plugin's UpdateContainer reply changes the "
         "container (containerd keeps the request; only a plugin's update replaces it)"),
    Fact(_r("pids", "memory.reservation", "memory.swappiness"), UPDATES, Effect.IGNORED,
         BOTH, "lab", "lab note L2 (dropped on every runtime); " + _TO_CRI),
    Fact(_UPDATE_IGNORED, UPDATES, Effect.IGNORED, CONTAINERD, "upstream", _TO_CRI),
    Fact(_UPDATE_IGNORED, UPDATES, Effect.IGNORED, CRIO, "assumed",
         "CRI-O's source not checked: assumed to keep no more than containerd (" + _TO_CRI
         + "); swap: lab note L2 (left at its old value)"),
)
for _fact in FACTS:
    assert set(_fact.leaves) <= set(LEAVES), f"a fact about unknown leaves: {_fact.leaves}"

_APPLIED = Verdict(Effect.APPLIED, "upstream",
                   "NRI's generator (adjust) / the runtime's update (resources) apply it")


def effect_of(path: str, route: Route, runtime: Runtime) -> Verdict:
    """What `runtime` does with the leaf at `path` when it arrives by `route`."""
    leaf = LEAVES.get(path)
    if leaf is None:  # a field newer than this table: assume the runtime drops it
        return Verdict(Effect.IGNORED, "upstream", "not in the field table")
    if route is not Route.ADJUST and not leaf.in_update:
        return Verdict(Effect.ABSENT, "upstream", "a ContainerUpdate cannot hold it")
    if route is Route.CRI_UPDATE:
        if path.removeprefix(RESOURCES) not in CARRIED:
            return Verdict(Effect.IGNORED, "upstream",
                           "CRI LinuxContainerResources cannot carry it "
                           "(bridge/contract/cri_service.py CARRIED)")
        own = next((f for f in FACTS if f.matches(path, route, runtime)), None)
        if own is not None:
            return Verdict(own.effect, own.source, own.why)
        route = Route.UPDATE  # the runtime's UpdateContainer event, applied as a reply
    if runtime.nri is not None and leaf.since > runtime.nri:
        return Verdict(Effect.IGNORED, "upstream",
                       f"first in NRI {format_version(leaf.since)} (docs/protocol.md"
                       "#what-each-nri-version-added)")
    if route is Route.ADJUST:
        for hazard in hazards_for(runtime.nri):
            if hazard.path == path:
                return Verdict(Effect.CRASHES, "upstream",
                               f"{hazard.panic}: {hazard.upstream} "
                               "(bridge/contract/runtime_hazards.py)")
    return next((Verdict(f.effect, f.source, f.why) for f in FACTS
                 if f.matches(path, route, runtime)), _APPLIED)


def has_fact(path: str, route: Route, runtime: Runtime, effect: Effect) -> bool:
    """Whether a fact with `effect` matches, whatever the rules before it say (a sysctl
    removal is lost on NRI v0.11 too, where an added sysctl crashes the runtime first)."""
    return any(f.effect is effect and f.matches(path, route, runtime) for f in FACTS)


def applied_leaves(route: Route, runtime: Runtime) -> tuple[Leaf, ...]:
    """The leaves `runtime` applies (or applies with a side effect) by `route`."""
    return tuple(leaf for leaf in LEAVES.values()
                 if effect_of(leaf.path, route, runtime).effect in (
                     Effect.APPLIED, Effect.SWAP_IS_LIMIT, Effect.REMOVAL_LOST))


def ignored(paths: Iterable[str], route: Route, runtime: Runtime) -> list[str]:
    """The leaf paths in `paths` that `runtime` silently ignores by `route`, sorted."""
    return sorted(p for p in set(paths) if effect_of(p, route, runtime).effect is Effect.IGNORED)
