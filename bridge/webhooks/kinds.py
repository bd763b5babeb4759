"""Adjustment kinds: the vocabulary of a webhook's `allow` list.

Maps every field of NRI's ContainerAdjustment (and the LinuxResources inside
adjustments and updates) to the kind an operator must allow for a webhook to
touch it. Kinds that can hand a container more privilege than its pod spec
asked for (mounts, devices, hooks, namespaces, seccomp, ...) are never on by
default (design §5). A field this table does not know (a newer NRI API) maps
to its own name, so it stays refused until someone allows it explicitly.
"""

from __future__ import annotations

from google.protobuf.message import Message

from bridge.proto.nri import api_pb2 as api

DEFAULT_ALLOW = frozenset({
    "resources", "env", "annotations", "rdt_class", "blockio_class", "oom_score_adj",
})

_ADJUSTMENT_FIELDS: dict[str, str] = {
    "annotations": "annotations", "mounts": "mounts", "env": "env", "hooks": "hooks",
    "rlimits": "rlimits", "CDI_devices": "cdi_devices", "args": "args",
}
_LINUX_FIELDS: dict[str, str] = {
    "devices": "devices", "cgroups_path": "cgroups_path", "oom_score_adj": "oom_score_adj",
    "io_priority": "io_priority", "seccomp_policy": "seccomp", "namespaces": "namespaces",
    "sysctl": "sysctl", "net_devices": "net_devices", "scheduler": "scheduler", "rdt": "rdt",
    "memory_policy": "memory_policy",
}
# LinuxResources: cgroup device rules grant device access, so they need `devices`.
_RESOURCE_FIELDS: dict[str, str] = {
    "memory": "resources", "cpu": "resources", "hugepage_limits": "resources",
    "unified": "resources", "pids": "resources", "blockio_class": "blockio_class",
    "rdt_class": "rdt_class", "devices": "devices",
}

ALL_KINDS = frozenset(_ADJUSTMENT_FIELDS.values()) | frozenset(_LINUX_FIELDS.values()) | (
    frozenset(_RESOURCE_FIELDS.values()))


def _set_fields(msg: Message) -> list[str]:
    return [fd.name for fd, _ in msg.ListFields()]


def resource_kinds(resources: api.LinuxResources) -> set[str]:
    return {_RESOURCE_FIELDS.get(name, name) for name in _set_fields(resources)}


def adjustment_kinds(adjust: api.ContainerAdjustment) -> set[str]:
    """Every kind an adjustment touches (removal markers count as touching)."""
    kinds: set[str] = set()
    for name in _set_fields(adjust):
        if name != "linux":
            kinds.add(_ADJUSTMENT_FIELDS.get(name, name))
    for name in _set_fields(adjust.linux):
        if name == "resources":
            kinds |= resource_kinds(adjust.linux.resources)
        else:
            kinds.add(_LINUX_FIELDS.get(name, name))
    return kinds


def update_kinds(update: api.ContainerUpdate) -> set[str]:
    return resource_kinds(update.linux.resources)
