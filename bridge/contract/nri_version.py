"""Which NRI version a runtime speaks.

Runtimes from NRI v0.12.0 send NRI_version in Configure (recorded: containerd
2.3.4 sends "v0.12.0"); that wins. Older ones do not, so it is inferred from the
runtime name and version with the table below (docs/protocol.md#configure-and-the-event-mask,
checked against the recordings of containerd 1.7.24, 2.1.9, 2.2.7, 2.3.4, 2.4.0-beta.0 and CRI-O
1.36.3 in bridge/simulator/scenarios, and the go.mod of containerd's release tags and CRI-O's 1.37
branch point). containerd reports its version with a "v" ("v2.2.7"), CRI-O
without ("1.36.3", name "cri-o"); containerd 2.x may report its name as "v2"
(the last element of its Go package path), though every recording says
"containerd", so both are accepted.

A pre-release (`v2.4.0-beta.0`: a `-` suffix, not Debian's `~` or a `+` build tag) comes before
its release and may vendor an older NRI than it: listed ones are read from the release tag's
go.mod (containerd v2.3.0-rc.0 still had v0.11.0, rc.1 v0.12.0; v2.4.0-beta.0 v0.12.1); an
unlisted one takes the NRI of the release before it (never newer than it may be: a lower
version subscribes to fewer events, counts more hazards and keeps updates on CRI).

CRI-O 1.33 embeds a v0.9.1 pre-release that already has UpdatePodSandbox. Which
event bits it accepts is not known to us, so it is taken as v0.9.1 and gets the pre-v0.10 mask
(the catalogue's `since` column, bridge.contract.catalogue.supported_mask): a rejected
Configure would cost the whole plugin, a missing UpdatePodSandbox only that event.
"""

from __future__ import annotations

import re

Version = tuple[int, int, int]

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(-[0-9A-Za-z.-]+)?")
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
    # 2.4.0 GA vendors v0.12.3 (the sysctl-removal fix on top of v0.12.1's deadlock fix).
    ((2, 4, 0), (2, 4, 999), (0, 12, 3)),
)
# Pre-releases whose NRI is not the one of the line before their release (go.mod at the tag).
_CONTAINERD_PRE: dict[str, Version] = {
    "2.3.0-rc.1": (0, 12, 0),
    "2.4.0-beta.0": (0, 12, 1),  # recorded: sends NRI_version v0.12.1 (containerd/nri#301)
}
_CRIO: tuple[tuple[Version, Version, Version], ...] = (
    ((1, 29, 2), (1, 30, 999), (0, 6, 0)),
    ((1, 31, 0), (1, 31, 999), (0, 6, 1)),
    ((1, 32, 0), (1, 32, 999), (0, 9, 0)),
    ((1, 33, 0), (1, 33, 999), (0, 9, 1)),  # a v0.9.1 pre-release (see above)
    ((1, 34, 0), (1, 34, 999), (0, 10, 0)),
    ((1, 35, 0), (1, 36, 999), (0, 11, 0)),  # recorded: 1.36.3 -> v0.11.0
    ((1, 37, 0), (1, 37, 999), (0, 12, 0)),  # go.mod of CRI-O's main at 1.37.0
)
_TABLES = {"containerd": _CONTAINERD, "v2": _CONTAINERD, "cri-o": _CRIO, "crio": _CRIO}
_PRE_RELEASES: dict[str, dict[str, Version]] = {"containerd": _CONTAINERD_PRE,
                                                "v2": _CONTAINERD_PRE}


def parse_version(text: str) -> Version | None:
    match = _VERSION_RE.match(text.strip())
    if match is None:
        return None
    major, minor, patch, _pre = match.groups()
    return int(major), int(minor), int(patch or 0)


def pre_release_of(text: str) -> str | None:
    """The pre-release `text` names ("2.4.0-beta.0" for "v2.4.0-beta.0+unknown"), or None for
    a release (Debian's "1.7.24~ds1" and a "+" build tag are releases)."""
    match = _VERSION_RE.match(text.strip())
    if match is None or match.group(4) is None:
        return None
    major, minor, patch, pre = match.groups()
    return f"{major}.{minor}.{patch or 0}{pre}"


def nri_version_of(runtime_name: str, runtime_version: str, nri_version: str) -> Version | None:
    """The runtime's NRI version: as reported, else inferred; None if unknown."""
    if nri_version.strip() not in _UNUSABLE:
        reported = parse_version(nri_version)
        if reported is not None:
            return reported
    name = runtime_name.strip().lower()
    table = _TABLES.get(name)
    version = parse_version(runtime_version)
    if table is None or version is None:
        return None
    pre = pre_release_of(runtime_version)
    if pre is not None:
        return _pre_release_nri(table, _PRE_RELEASES.get(name, {}), pre, version)
    for first, last, nri in table:
        if first <= version <= last:
            return nri
    if version > table[-1][1]:
        return table[-1][2]  # newer than the table: at least the newest known
    return None


def _pre_release_nri(table: tuple[tuple[Version, Version, Version], ...],
                     listed: dict[str, Version], pre: str, version: Version) -> Version | None:
    """A pre-release's NRI: listed, else the one of the release before it."""
    if pre in listed:
        return listed[pre]
    before = [nri for first, _last, nri in table if first < version]
    return before[-1] if before else None


def format_version(nri: Version | None) -> str:
    return "unknown" if nri is None else "v{}.{}.{}".format(*nri)


# NRI before v0.12.1 holds its Adaptation lock while the runtime applies a plugin's
# UpdateContainers, and the runtime's own NRI lock is taken first by every lifecycle event and
# second there: a container exit during an unsolicited update deadlocks the runtime
# (containerd/containerd#13733, fixed by containerd/nri#301 in v0.12.1;
# docs/protocol.md#unsolicited-updates-and-the-runtimes-locks). CRI-O wraps the same library in
# locks of its own that nobody has checked against it, and no CRI-O release vendors v0.12.1 yet
# (1.37 is on v0.12.0), so only containerd counts as fixed. containerd 2.3 (the long-term-support
# line) stays on v0.12.0 without a backport; 2.4 is the first line with the fix (2.4.0-beta.0:
# v0.12.1, recorded; 150 s of plugin-initiated UpdateContainers beside CRI churn ran clean there).
PLUGIN_UPDATES_SAFE_FROM: Version = (0, 12, 1)
_CHECKED_RUNTIMES = frozenset({"containerd", "v2"})


def plugin_updates_can_deadlock(runtime_name: str, nri: Version | None) -> bool:
    """Whether an unsolicited UpdateContainers may deadlock this runtime (unknown: yes)."""
    if runtime_name.strip().lower() not in _CHECKED_RUNTIMES:
        return True
    return nri is None or nri < PLUGIN_UPDATES_SAFE_FROM
