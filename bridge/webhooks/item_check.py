"""The items of an allowed kind a webhook may still not set, checked on one part of a reply.

After the kinds (bridge.webhooks.reply_walk, checked by the guard), the items inside them:
`unified` keys, annotation keys and env names refused until named
(bridge.webhooks.named_items), and oom_score_adj, pids and hugepage limits bounded by the target
container's QoS class and the node (bridge.webhooks.value_bounds). A refusal is
`WebhookFailure(DISALLOWED)` naming the JSON path, the item, why, and the `allow` entry that
would permit it, so it takes the webhook's failure policy like any disallowed kind.

Must not: do I/O (the node's hugepages are a callable, read only when a limit needs it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.named_items import named_item_refusal
from bridge.webhooks.value_bounds import (
    OutOfBounds,
    ReplyTarget,
    check_hugepages,
    check_oom_score_adj,
    check_pids,
)

Hugepages = Callable[[], Mapping[str, int]]


def _refuse(path: str, cls: str, name: str, reason: str) -> WebhookFailure:
    return WebhookFailure(FailureKind.DISALLOWED, f"{path}: {cls} {name[:80]!r} is refused by "
                          f"default: {reason} (allow it by name: {cls}:{name[:80]})")


def check_adjustment(adjust: api.ContainerAdjustment, allow: Collection[str], target: ReplyTarget,
                     hugepages: Hugepages, where: str = "adjust") -> None:
    for key in sorted(adjust.annotations):  # protobuf map order varies: name the same key
        name = key.removeprefix("-")
        reason = named_item_refusal("annotations", name, allow)
        if reason is not None:
            raise _refuse(f"{where}.annotations", "annotations", name, reason)
    for i, kv in enumerate(adjust.env):
        if kv.key.startswith("-"):
            continue  # a removal takes back what the pod spec set: it loads or routes nothing
        name = kv.key
        reason = named_item_refusal("env", name, allow)
        if reason is not None:
            raise _refuse(f"{where}.env[{i}].key", "env", name, reason)
    linux = adjust.linux
    try:
        if linux.HasField("oom_score_adj"):
            check_oom_score_adj(linux.oom_score_adj.value, target, allow,
                                f"{where}.linux.oom_score_adj")
        if linux.HasField("resources"):
            check_resources(linux.resources, allow, target, hugepages,
                            f"{where}.linux.resources")
    except OutOfBounds as exc:
        raise WebhookFailure(FailureKind.DISALLOWED, str(exc)) from None


def check_resources(resources: api.LinuxResources, allow: Collection[str], target: ReplyTarget,
                    hugepages: Hugepages, where: str) -> None:
    """The items of LinuxResources (an adjustment's or an update's). Raises WebhookFailure
    for a refused unified key, OutOfBounds for a bounded value."""
    for key in sorted(resources.unified):
        reason = named_item_refusal("unified", key, allow)
        if reason is not None:
            raise _refuse(f"{where}.unified", "unified", key, reason)
    if resources.HasField("pids"):
        check_pids(resources.pids.limit, target, allow, f"{where}.pids.limit")
    if resources.hugepage_limits:
        check_hugepages(resources.hugepage_limits, target, allow, hugepages,
                        f"{where}.hugepage_limits")


def check_update(update: api.ContainerUpdate, allow: Collection[str], target: ReplyTarget,
                 hugepages: Hugepages, where: str) -> None:
    if not update.linux.HasField("resources"):
        return
    try:
        check_resources(update.linux.resources, allow, target, hugepages,
                        f"{where}.linux.resources")
    except OutOfBounds as exc:
        raise WebhookFailure(FailureKind.DISALLOWED, str(exc)) from None
