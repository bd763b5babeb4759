"""Adjustment kinds: the vocabulary of a webhook's `allow` list, and its default.

Which kinds an adjustment or update touches is found by the reply walk
(bridge.webhooks.reply_walk) from the field table in bridge.contract.adjustment_fields
(every field of NRI's ContainerAdjustment and the LinuxResources inside adjustments and
updates has the kind an operator must allow for a webhook to touch it). Kinds that
can hand a container more privilege than its pod spec asked for (mounts, devices,
hooks, namespaces, seccomp, ...) are never on by default
(docs/configuration.md#allow-kinds). A field the table does not know (a newer NRI API)
is its own kind, so it stays refused until someone allows it by name.
"""

from __future__ import annotations

from bridge.contract.adjustment_fields import ALL_KINDS

DEFAULT_ALLOW = frozenset({
    "resources", "env", "annotations", "rdt_class", "blockio_class", "oom_score_adj",
})

__all__ = ["ALL_KINDS", "DEFAULT_ALLOW"]
