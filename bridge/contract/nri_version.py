"""Which NRI version a runtime speaks.

Runtimes from NRI v0.12.0 send NRI_version in Configure (recorded: containerd
2.3.4 sends "v0.12.0"); that wins. Older ones do not, so it is inferred from the
runtime name and version with the table below (docs/protocol.md#configure-and-the-event-mask,
checked against the recordings of containerd 1.7.24, 2.1.9, 2.2.7, 2.3.4 and CRI-O 1.36.3 in
bridge/simulator/scenarios). containerd reports its version with a "v" ("v2.2.7"), CRI-O
without ("1.36.3", name "cri-o"); containerd 2.x may report its name as "v2"
(the last element of its Go package path), though every recording says
"containerd", so both are accepted.

CRI-O 1.33 embeds a v0.9.1 pre-release that already has UpdatePodSandbox. Which
event bits it accepts is not known to us, so it is taken as v0.9.1 and gets the pre-v0.10 mask
(the catalogue's `since` column, bridge.contract.catalogue.supported_mask): a rejected
Configure would cost the whole plugin, a missing UpdatePodSandbox only that event.
"""

from __future__ import annotations

import re

Version = tuple[int, int, int]

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
_UNUSABLE = {"", "(devel)", "0.0.0-unknown", "unknown"}

# (first runtime version, last runtime version) -> NRI version, per runtime.
_CONTAINERD: tuple[tuple[Version, Version, Version], ...] = (
    ((1, 7, 0), (1, 7, 6), (0, 3, 0)),
    ((1, 7, 7), (1, 7, 13), (0, 4, 0)),
    ((1, 7, 14), (1, 7, 15), (0, 6, 0)),
    ((1, 7, 16), (1, 7, 25), (0, 6, 1)),
    ((1, 7, 26), (1, 7, 999), (0, 8, 0)),
    ((2, 0, 0), (2, 1, 999), (0, 8, 0)),
    ((2, 2, 0), (2, 2, 0), (0, 10, 0)),
    ((2, 2, 1), (2, 2, 999), (0, 11, 0)),  # recorded: 2.2.7 -> v0.11.0
    ((2, 3, 0), (2, 3, 999), (0, 12, 0)),  # recorded: 2.3.4 sends NRI_version v0.12.0
    ((2, 4, 0), (2, 4, 999), (0, 12, 1)),  # the first to vendor containerd/nri#301 (it reports it)
)
_CRIO: tuple[tuple[Version, Version, Version], ...] = (
    ((1, 29, 2), (1, 30, 999), (0, 6, 0)),
    ((1, 31, 0), (1, 31, 999), (0, 6, 1)),
    ((1, 32, 0), (1, 32, 999), (0, 9, 0)),
    ((1, 33, 0), (1, 33, 999), (0, 9, 1)),  # a v0.9.1 pre-release (see above)
    ((1, 34, 0), (1, 34, 999), (0, 10, 0)),
    ((1, 35, 0), (1, 36, 999), (0, 11, 0)),  # recorded: 1.36.3 -> v0.11.0
)
_TABLES = {"containerd": _CONTAINERD, "v2": _CONTAINERD, "cri-o": _CRIO, "crio": _CRIO}


def parse_version(text: str) -> Version | None:
    match = _VERSION_RE.match(text.strip())
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def nri_version_of(runtime_name: str, runtime_version: str, nri_version: str) -> Version | None:
    """The runtime's NRI version: as reported, else inferred; None if unknown."""
    if nri_version.strip() not in _UNUSABLE:
        reported = parse_version(nri_version)
        if reported is not None:
            return reported
    table = _TABLES.get(runtime_name.strip().lower())
    version = parse_version(runtime_version)
    if table is None or version is None:
        return None
    for first, last, nri in table:
        if first <= version <= last:
            return nri
    if version > table[-1][1]:
        return table[-1][2]  # newer than the table: at least the newest known
    return None


def format_version(nri: Version | None) -> str:
    return "unknown" if nri is None else "v{}.{}.{}".format(*nri)


# NRI before v0.12.1 holds its Adaptation lock while the runtime applies a plugin's
# UpdateContainers, and the runtime's own NRI lock is taken first by every lifecycle event and
# second there: a container exit during an unsolicited update deadlocks the runtime
# (containerd/containerd#13733, fixed by containerd/nri#301 in v0.12.1;
# docs/protocol.md#unsolicited-updates-and-the-runtimes-locks). CRI-O wraps the same library in
# locks of its own that nobody has checked against it, so only containerd counts as fixed.
PLUGIN_UPDATES_SAFE_FROM: Version = (0, 12, 1)
_CHECKED_RUNTIMES = frozenset({"containerd", "v2"})


def plugin_updates_can_deadlock(runtime_name: str, nri: Version | None) -> bool:
    """Whether an unsolicited UpdateContainers may deadlock this runtime (unknown: yes)."""
    if runtime_name.strip().lower() not in _CHECKED_RUNTIMES:
        return True
    return nri is None or nri < PLUGIN_UPDATES_SAFE_FROM
