"""Which adjustment fields a runtime applies, by the NRI version it embeds.

A runtime ignores fields its NRI version does not know: an adjustment that uses
them is silently dropped, with no error (protocol §6.4). So the envelope tells a
policy what the connected runtime applies (`runtime.capabilities`), and the
bridge warns and counts when a policy sets a field that runtime would drop.

Fields are named by their path in ContainerAdjustment / ContainerUpdate, as in
the webhook JSON (`linux.resources.pids`, `CDI_devices`, `args`); a removal of an
entry counts as using the field. The first NRI version of each field is from the
message reference (protocol §6.3, §6.4).

Owns: that table and the two questions asked of it. Must not: log or count
(the webhook handler does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf.message import Message

from bridge.contract.nri_version import Version, format_version
from bridge.proto.nri import api_pb2 as api

_ALWAYS: Version = (0, 0, 0)  # in every NRI version a runtime ships (v0.3.0 onwards)

# Adjustment field path -> first NRI version whose runtimes apply it.
FIELD_SINCE: dict[str, Version] = {
    "annotations": _ALWAYS, "mounts": _ALWAYS, "env": _ALWAYS, "hooks": _ALWAYS,
    "rlimits": _ALWAYS,
    "CDI_devices": (0, 7, 0),
    "args": (0, 10, 0),
    "linux.devices": _ALWAYS, "linux.cgroups_path": _ALWAYS,
    "linux.resources.memory": _ALWAYS, "linux.resources.cpu": _ALWAYS,
    "linux.resources.hugepage_limits": _ALWAYS, "linux.resources.unified": _ALWAYS,
    "linux.resources.blockio_class": _ALWAYS, "linux.resources.rdt_class": _ALWAYS,
    "linux.resources.devices": _ALWAYS,
    "linux.resources.pids": (0, 7, 0),
    "linux.oom_score_adj": (0, 7, 0),
    "linux.io_priority": (0, 10, 0), "linux.seccomp_policy": (0, 10, 0),
    "linux.namespaces": (0, 10, 0),
    "linux.sysctl": (0, 11, 0), "linux.net_devices": (0, 11, 0),
    "linux.scheduler": (0, 11, 0), "linux.rdt": (0, 11, 0),
    "linux.memory_policy": (0, 12, 0),
}


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
    return sorted(p for p in used if FIELD_SINCE.get(p, (99, 0, 0)) > nri)


def _collect(msg: Message, prefix: str, used: set[str]) -> None:
    for field, value in msg.ListFields():
        path = prefix + field.name
        if path in ("linux", "linux.resources"):
            _collect(value, path + ".", used)
        else:
            used.add(path)
