"""Runtime profiles: what a given runtime build does on the NRI wire.

A profile is an immutable value. Everything the simulator (and `try`, and the test kit's
`send_pod`) varies per runtime is derived from the NRI module version the runtime embeds
(docs/protocol.md#configure-and-the-event-mask, docs/protocol.md#synchronize,
docs/protocol.md#how-events-are-delivered, docs/protocol.md#what-each-nri-version-added), so the
flags cannot drift apart:

| NRI       | timeouts | NRI_version | mask   | split sync | non-CRUD events delivered via    |
|-----------|----------|-------------|--------|------------|----------------------------------|
| < v0.7    | no       | no          | 0x07FF | never      | StateChange                      |
| v0.7-v0.9 | yes      | no          | 0x07FF | > 4 MiB    | StateChange                      |
| v0.10/11  | yes      | no          | 0x3FFF | > 4 MiB    | StateChange (+UpdatePodSandbox)  |
| >= v0.12  | yes      | yes         | 0x3FFF | > 4 MiB    | dedicated RPCs, SC fallback      |

The mask and the events a runtime has come from the event catalogue's `since` column
(bridge.contract.catalogue: `known_to`, `supported_mask`), the rest from the version checks below.

Two facts are not a function of the NRI version but of the runtime around it,
so a profile states them (recorded 2026-11-24 and 2026-12-01, bridge/simulator/scenarios): whether a
CRI UpdatePodSandboxResources reaches NRI at all (containerd 2.2.x leaves the
CRI call unimplemented), and whether PostUpdatePodSandbox follows it (CRI-O
1.36 never sends it).

Which reply fields crash the runtime is a function of the NRI version too, from the contract's
table (bridge.contract.runtime_hazards): containerd 2.2.7 and CRI-O 1.36.3 (NRI v0.11.0) die on
an added sysctl, and so does their simulation (bridge.simulator.result_merge); NRI v0.11.0 to
v0.12.2 (up to containerd 2.4.0-beta.0) lose a lone sysctl removal, v0.12.3 (2.4.0 GA) keeps
it. What the runtime applies of each reply leaf, per route, is the field table's
(bridge.contract.runtime_effects, keyed by `runtime`: its name and NRI version).
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.contract.catalogue import NriEvent, known_to, supported_mask
from bridge.contract.nri_version import Version, plugin_updates_can_deadlock
from bridge.contract.runtime_effects import Runtime
from bridge.contract.runtime_hazards import Hazard, hazards_for
from bridge.runtime_facts.runtime_defaults import CONTAINERD_1_7, CONTAINERD_2, RuntimeDefaults

# ttrpc >= v1.2.6 refuses locally to send a message above 4 MiB; that refusal is
# what makes a v0.7+ runtime split Synchronize (docs/protocol.md#what-a-go-ttrpc-peer-answers,
# docs/protocol.md#synchronize).
TTRPC_MAX_MESSAGE_BYTES = 4 << 20
# v0.2-v0.6 mux writes fail above 16 MiB (EMSGSIZE, docs/protocol.md#size-limits).
OLD_MUX_MAX_WRITE_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class RuntimeProfile:
    """One runtime build as seen by a plugin."""

    key: str
    runtime_name: str
    runtime_version: str
    nri: Version
    nri_version_string: str = ""
    resizes_pods: bool = True  # CRI UpdatePodSandboxResources -> NRI UpdatePodSandbox
    post_resize_event: bool = True  # ... followed by PostUpdatePodSandbox
    # What the runtime adds to kubelet's configs (mounts, env, devices; `try` uses it).
    defaults: RuntimeDefaults = CONTAINERD_2

    @property
    def sends_timeouts(self) -> bool:
        """ConfigureRequest.registration_timeout/request_timeout (v0.7.0+)."""
        return self.nri >= (0, 7, 0)

    @property
    def sends_nri_version(self) -> bool:
        """ConfigureRequest.NRI_version (v0.12.0+)."""
        return self.nri >= (0, 12, 0)

    @property
    def valid_mask(self) -> int:
        """Event bits the runtime accepts in ConfigureResponse.events."""
        return supported_mask(self.nri)

    @property
    def splits_sync(self) -> bool:
        """Whether a Synchronize above 4 MiB is split into `more` chunks (v0.7.0+)."""
        return self.nri >= (0, 7, 0)

    @property
    def dedicated_rpcs(self) -> bool:
        """Dedicated RPCs for every event, StateChange only as fallback (v0.12.0+)."""
        return self.nri >= (0, 12, 0)

    def knows(self, event: NriEvent) -> bool:
        """Whether the runtime's NRI version has `event` (the catalogue's `since` column)."""
        return event in known_to(self.nri)

    def delivers(self, event: NriEvent) -> bool:
        """Whether this runtime ever sends `event` to a subscribed plugin."""
        if not self.knows(event):
            return False
        if event is NriEvent.UPDATE_POD_SANDBOX:
            return self.resizes_pods
        if event is NriEvent.POST_UPDATE_POD_SANDBOX:
            return self.resizes_pods and self.post_resize_event
        return True

    @property
    def runtime(self) -> Runtime:
        """The runtime as the field table knows it (bridge.contract.runtime_effects: what it
        applies of each leaf, per route)."""
        return Runtime(self.runtime_name, self.runtime_version, self.nri)

    @property
    def hazards(self) -> tuple[Hazard, ...]:
        """Reply fields whose merge panics this runtime
        (docs/protocol.md#reply-fields-that-crash-a-runtime)."""
        return hazards_for(self.nri)

    @property
    def checks_plugin_name(self) -> bool:
        """RegisterPlugin names must match [A-Za-z0-9_.+-]+ (v0.12.0+)."""
        return self.nri >= (0, 12, 0)

    @property
    def plugin_updates_deadlock(self) -> bool:
        """Whether a plugin's UpdateContainers can deadlock this runtime: NRI < v0.12.1, or a
        runtime not known to be fixed (docs/protocol.md#unsolicited-updates-and-the-runtimes-locks).
        """
        return plugin_updates_can_deadlock(self.runtime_name, self.nri)

    @property
    def max_send_bytes(self) -> int:
        """Largest ttrpc message the runtime's own client will write."""
        return TTRPC_MAX_MESSAGE_BYTES if self.splits_sync else OLD_MUX_MAX_WRITE_BYTES


PROFILES: dict[str, RuntimeProfile] = {
    p.key: p
    for p in (
        # Recorded (bridge/simulator/scenarios): Debian trixie containerd (NRI v0.6.1).
        RuntimeProfile("containerd-1.7.24", "containerd", "1.7.24~ds1", (0, 6, 1),
                       defaults=CONTAINERD_1_7),
        # Recorded: Debian sid containerd 2.1.9 (NRI v0.8.0); it reports "containerd".
        RuntimeProfile("containerd-2.1.9", "containerd", "2.1.9+unknown", (0, 8, 0)),
        # Recorded: upstream containerd 2.2.7 (NRI v0.11.0). Most events still arrive as
        # StateChange; its CRI UpdatePodSandboxResources is unimplemented, so no
        # UpdatePodSandbox ever reaches a plugin.
        RuntimeProfile("containerd-2.2.7", "containerd", "v2.2.7", (0, 11, 0),
                       resizes_pods=False),
        # Recorded: upstream containerd 2.3.4 (NRI v0.12.0): one dedicated RPC per event,
        # StateChange only for a plugin that answers Unimplemented; sends NRI_version.
        RuntimeProfile("containerd-2.3.4", "containerd", "v2.3.4", (0, 12, 0), "v0.12.0"),
        # Recorded: upstream containerd 2.4.0-beta.0 (NRI v0.12.1, sent as NRI_version): on the
        # wire like 2.3.4; the first NRI whose plugin-initiated UpdateContainers cannot deadlock.
        RuntimeProfile("containerd-2.4.0-beta.0", "containerd", "v2.4.0-beta.0", (0, 12, 1),
                       "v0.12.1"),
        # Not recorded: containerd 2.4.0 GA, the beta's runtime on NRI v0.12.3 (a lone sysctl
        # removal is applied). NRI_version as v0.12.x reports it (its go.mod's version).
        RuntimeProfile("containerd-2.4.0", "containerd", "v2.4.0", (0, 12, 3), "v0.12.3"),
        # Recorded: upstream CRI-O 1.36.3 (NRI v0.11.0): no "v" in its version, and a pod
        # resize sends UpdatePodSandbox but never PostUpdatePodSandbox.
        RuntimeProfile("cri-o-1.36.3", "cri-o", "1.36.3", (0, 11, 0), post_resize_event=False),
        # Not recorded: CRI-O 1.37.0 (its main at the 1.37.0 version bump, read-only): NRI
        # v0.12.0, so one dedicated RPC per event and NRI_version sent as the library reports it;
        # still no PostUpdatePodSandbox (its server calls only UpdatePodSandbox). Unsolicited
        # updates stay on CRI: v0.12.0 has the lock order of containerd/containerd#13733.
        RuntimeProfile("cri-o-1.37.0", "cri-o", "1.37.0", (0, 12, 0), "v0.12.0",
                       post_resize_event=False),
        # A runtime built on current NRI: dedicated RPCs with StateChange fallback.
        RuntimeProfile("nri-v0.12", "nri-simulator", "0.12.2", (0, 12, 2), "v0.12.2"),
    )
}
DEFAULT_PROFILE = "containerd-2.1.9"


def get_profile(key: str) -> RuntimeProfile:
    """The profile named `key`; raises KeyError listing the known ones."""
    try:
        return PROFILES[key]
    except KeyError:
        raise KeyError(f"unknown runtime profile {key!r}; known: {', '.join(PROFILES)}") from None
