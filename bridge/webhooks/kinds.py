"""Adjustment kinds: the vocabulary of a webhook's `allow` list.

Tells which kinds an adjustment or update touches, from the field table in
bridge.contract.adjustment_fields (every field of NRI's ContainerAdjustment and
the LinuxResources inside adjustments and updates has the kind an operator must
allow for a webhook to touch it). Kinds that can hand a container more privilege
than its pod spec asked for (mounts, devices, hooks, namespaces, seccomp, ...)
are never on by default (docs/configuration.md#allow-kinds). A field the table does not know (a
newer NRI API) is its own kind, so it stays refused until someone allows it by name.
"""

from __future__ import annotations

from collections.abc import Mapping

from google.protobuf.message import Message

from bridge.contract.adjustment_fields import (
    ADJUSTMENT_FIELDS,
    ALL_KINDS,
    LINUX_FIELDS,
    RESOURCE_FIELDS,
    FieldRule,
    Owner,
    rule_of,
)
from bridge.proto.nri import api_pb2 as api

DEFAULT_ALLOW = frozenset({
    "resources", "env", "annotations", "rdt_class", "blockio_class", "oom_score_adj",
})

__all__ = ["ALL_KINDS", "DEFAULT_ALLOW", "adjustment_kinds", "resource_kinds", "update_kinds"]


def _set_fields(msg: Message) -> list[str]:
    return [fd.name for fd, _ in msg.ListFields()]


def _kinds(msg: Message, table: Mapping[str, FieldRule]) -> set[str]:
    rules = (rule_of(table, name) for name in _set_fields(msg))
    return {r.kind for r in rules if r.owner is not Owner.WALKED}


def resource_kinds(resources: api.LinuxResources) -> set[str]:
    return _kinds(resources, RESOURCE_FIELDS)


def adjustment_kinds(adjust: api.ContainerAdjustment) -> set[str]:
    """Every kind an adjustment touches (removal markers count as touching)."""
    return (_kinds(adjust, ADJUSTMENT_FIELDS) | _kinds(adjust.linux, LINUX_FIELDS)
            | resource_kinds(adjust.linux.resources))


def update_kinds(update: api.ContainerUpdate) -> set[str]:
    return resource_kinds(update.linux.resources)
