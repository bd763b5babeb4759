"""systemd slice names: the one grammar both products read and write.

Owns: how a slice's name spells its place in the tree, both ways, and the systemd form of a
container's cgroups path. kubelet's systemd cgroup driver names every level of the pod tree
this way (``CgroupName.ToSystemd``); the bridge's ``try`` builds the names (bridge.kube), the
policy server expands them into cgroup directories (policy_server.node.cgroup_layout), checks
that a directory is a systemd unit (policy_server.node.unit_properties) and, through the policy
SDK, finds a pod's kube-QoS level (koordinator-qos). Must not: read the cgroup tree or know
which program asks.

The grammar (systemd.slice(5), systemd-escape(1)):

    slice        ::= part ("-" part)* ".slice"     part non-empty, no "-" and no "/"
    slice path   ::= the slice of every prefix     a-b.slice -> a.slice/a-b.slice
    cgroups path ::= slice ":" prefix ":" id       the scope <slice path>/<prefix>-<id>.scope

A ``-`` inside a part cannot be written (it would start a new level): kubelet writes it as
``_`` (a pod UID's dashes). The root slice ``-.slice`` is no pod's parent and is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

SLICE_SUFFIX = ".slice"
SCOPE_SUFFIX = ".scope"


class SliceNameError(ValueError):
    """``text`` is not a slice name (or not a systemd cgroups path)."""


def is_slice_name(text: str) -> bool:
    """Whether ``text`` is written as a single slice name (not a path): the systemd driver's
    form of a cgroup parent. Says nothing of its parts (``slice_parts`` checks them)."""
    return "/" not in text and text.endswith(SLICE_SUFFIX)


def slice_parts(name: str) -> tuple[str, ...]:
    """The levels ``a-b-c.slice`` names: ``("a", "b", "c")``; ``SliceNameError`` unless the
    name is a slice whose every part is non-empty."""
    if not is_slice_name(name):
        raise SliceNameError(f"invalid systemd slice name {name!r}")
    parts = tuple(name.removesuffix(SLICE_SUFFIX).split("-"))
    if not all(parts):
        raise SliceNameError(f"invalid systemd slice name {name!r}")
    return parts


def slice_name(parts: Sequence[str]) -> str:
    """The slice for these levels, each part's own ``-`` escaped as kubelet does (``_``)."""
    escaped = [part.replace("-", "_") for part in parts]
    if not escaped or not all(escaped) or any("/" in part for part in escaped):
        raise SliceNameError(f"no slice name for the parts {list(parts)!r}")
    return "-".join(escaped) + SLICE_SUFFIX


def slice_path(name: str) -> str:
    """The directory of slice ``name`` below the cgroup root, without a leading ``/``:
    ``a-b.slice`` -> ``a.slice/a-b.slice``."""
    parts = slice_parts(name)
    return "/".join("-".join(parts[: i + 1]) + SLICE_SUFFIX for i in range(len(parts)))


def parent_slice(name: str) -> str | None:
    """The slice ``name`` sits in (``a-b.slice`` for ``a-b-c.slice``); None for a top-level
    slice (its parent is the root slice)."""
    parts = slice_parts(name)
    return "-".join(parts[:-1]) + SLICE_SUFFIX if len(parts) > 1 else None


def is_slice_path(names: Sequence[str]) -> bool:
    """Whether directory names ``names`` (top first) are a chain of slices, each named after
    the one above it: the directories systemd makes for its slice units."""
    if not names:
        return False
    try:
        return slice_path(names[-1]).split("/") == list(names)
    except SliceNameError:
        return False


def cgroups_path(slice_: str, prefix: str, container_id: str) -> str:
    """A container's cgroups path with the systemd driver: ``<slice>:<prefix>:<id>``."""
    return f"{slice_}:{prefix}:{container_id}"


def scope_of(path: str) -> tuple[str, str] | None:
    """``<slice>:<prefix>:<id>`` -> (the slice, the scope unit ``<prefix>-<id>.scope``); None
    when ``path`` is not in the systemd form (a cgroupfs path); ``SliceNameError`` when it is
    but a part is empty."""
    fields = path.split(":")
    if len(fields) != 3 or "/" in path:
        return None
    slice_, prefix, container_id = fields
    if not prefix or not container_id:
        raise SliceNameError(f"invalid systemd cgroups path {path!r}")
    return slice_, f"{prefix}-{container_id}{SCOPE_SUFFIX}"
