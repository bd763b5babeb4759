"""Adjustment kinds: the vocabulary of a webhook's `allow` list, and its default.

Which kinds an adjustment or update touches is found by the reply walk
(bridge.webhooks.reply_walk) from the field table in bridge.contract.adjustment_fields
(every field of NRI's ContainerAdjustment and the LinuxResources inside adjustments and
updates has the kind an operator must allow for a webhook to touch it). Kinds that
can hand a container more privilege than its pod spec asked for (mounts, devices,
hooks, namespaces, seccomp, ...) are never on by default
(docs/configuration.md#allow-kinds). A field the table does not know (a newer NRI API)
is its own kind, so it stays refused until someone allows it by name.

Inside an allowed kind some items stay refused until named (bridge.webhooks.named_items,
bridge.webhooks.value_bounds); an `allow` entry `<class>:<name>` names one, and needs the kind
that carries it (`CLASS_KIND`). `check_allow` validates a list of both.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from bridge.contract.adjustment_fields import ALL_KINDS
from bridge.errors import ConfigError
from bridge.webhooks.value_bounds import LIMIT_NAMES

DEFAULT_ALLOW = frozenset({
    "resources", "env", "annotations", "rdt_class", "blockio_class", "oom_score_adj",
})
# What POST /v1/updates may change by default: resources only (no cgroup device rules).
CONTROL_UPDATE_KINDS = frozenset({"resources", "rdt_class", "blockio_class"})
# The class of a named entry -> the kind that must be allowed with it.
CLASS_KIND = {"unified": "resources", "annotations": "annotations", "env": "env"}
LIMIT_KIND = {"oom_score_adj": "oom_score_adj", "pids": "resources", "hugepages": "resources"}


def check_allow(entries: Sequence[str], key: str, kinds: Collection[str] = ALL_KINDS,
                ) -> frozenset[str]:
    """The entries as a set, or ConfigError naming the first bad one (`key[i]`)."""
    listed = frozenset(entries)
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        cls, colon, name = entry.partition(":")
        if not colon:
            if entry not in kinds:
                raise ConfigError(where, f"unknown kind {entry!r} (known: "
                                  f"{', '.join(sorted(kinds))})")
            continue
        if cls == "limits":
            if name not in LIMIT_NAMES:
                raise ConfigError(where, f"unknown limit {name!r} (known: "
                                  f"{', '.join(LIMIT_NAMES)})")
            needs = LIMIT_KIND[name]
        elif cls in CLASS_KIND:
            if not name or any(c.isspace() or c == "\0" for c in name):
                raise ConfigError(where, f"{entry!r}: expected {cls}:<name> or {cls}:<prefix>*")
            needs = CLASS_KIND[cls]
        else:
            raise ConfigError(where, f"unknown class {cls!r} in {entry!r} (known: "
                              f"{', '.join([*CLASS_KIND, 'limits'])})")
        if needs not in kinds:
            raise ConfigError(where, f"{entry!r} cannot be allowed here (only "
                              f"{', '.join(sorted(kinds))})")
        if needs not in listed:
            raise ConfigError(where, f"{entry!r} needs the kind {needs!r} in the same list")
    return listed


__all__ = ["ALL_KINDS", "CONTROL_UPDATE_KINDS", "DEFAULT_ALLOW", "check_allow"]
