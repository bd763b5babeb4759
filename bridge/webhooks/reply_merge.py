"""Merge the contributions of several webhooks into one NRI answer, refusing conflicts.

Ownership follows NRI's own rules (protocol §7.2) at the granularity of one
field of one container: a map key (annotations, sysctl, unified, net devices),
a list entry's identity (env name, mount destination, device path, namespace
type, rlimit type, CDI name, hugepage size) or a single-owner field (each
cpu/memory sub-field, classes, oom score, cgroups path, args, ...). Hooks and
cgroup device rules are append-only and never conflict. Which is which is the
field table in bridge.contract.adjustment_fields.

Decision: every key a webhook sets *or removes* is claimed by it; a later
webhook touching a claimed key conflicts with the earlier one, and the
conflict names both. There is no cross-webhook override. Inside one reply, a
removal plus an addition of the same key is NRI's "replace" and is fine, but
setting the same key twice is an invalid reply.

Claims are checked before anything is applied, so a refused contribution
leaves the merged result untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from bridge.contract.adjustment_fields import (
    ADJUSTMENT_FIELDS,
    LINUX_FIELDS,
    RESOURCE_FIELDS,
    Touch,
    touches,
)
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.guard import Contribution

CREATED = ""  # the container an adjustment applies to

# (container id, field, key); key is "" for single-owner fields.
Claim = tuple[str, str, str]


def _resource_touches(res: api.LinuxResources) -> Iterator[Touch]:
    return touches(res, RESOURCE_FIELDS)


def _adjustment_touches(adj: api.ContainerAdjustment) -> Iterator[Touch]:
    yield from touches(adj, ADJUSTMENT_FIELDS)
    yield from touches(adj.linux, LINUX_FIELDS)
    yield from _resource_touches(adj.linux.resources)


def claims_of(c: Contribution) -> set[Claim]:
    """The claims of one reply; refuses a reply that sets the same thing twice."""
    claims: set[Claim] = set()
    set_once: set[Claim] = set()
    touched: list[tuple[str, Touch]] = []
    if c.adjust is not None:
        touched += [(CREATED, t) for t in _adjustment_touches(c.adjust)]
    for update in c.updates:
        touched += [(update.container_id, t) for t in _resource_touches(update.linux.resources)]
    for container, (name, key, removal) in touched:
        claim = (container, name, key)
        if not removal:
            if claim in set_once:
                raise WebhookFailure(FailureKind.INVALID,
                                     f"reply sets {describe(claim)} more than once")
            set_once.add(claim)
        claims.add(claim)
    return claims


def describe(claim: Claim) -> str:
    container, name, key = claim
    text = f"{name} {key!r}" if key else name
    return text if container == CREATED else f"{text} of container {container[:16]}"


@dataclass(slots=True)
class Merger:
    """Accumulates checked contributions in webhook order."""

    owners: dict[Claim, str] = field(default_factory=dict)
    adjust: api.ContainerAdjustment | None = None
    updates: dict[str, api.ContainerUpdate] = field(default_factory=dict)

    def check(self, c: Contribution) -> set[Claim]:
        """Raise WebhookFailure(CONFLICT) naming both webhooks, or return c's claims."""
        claims = claims_of(c)
        for claim in sorted(claims):
            owner = self.owners.get(claim)
            if owner is not None:
                raise WebhookFailure(FailureKind.CONFLICT, f'webhooks "{owner}" and '
                                     f'"{c.webhook}" both tried to set {describe(claim)}')
        return claims

    def add(self, c: Contribution) -> None:
        """Merge c in, all or nothing."""
        claims = self.check(c)
        for claim in claims:
            self.owners[claim] = c.webhook
        if c.adjust is not None:
            if self.adjust is None:
                self.adjust = api.ContainerAdjustment()
            # Claims are disjoint, so protobuf's merge (maps union, lists append,
            # set scalars win) is exactly the union of both adjustments.
            self.adjust.MergeFrom(c.adjust)
        for update in c.updates:
            merged = self.updates.get(update.container_id)
            if merged is None:
                merged = self.updates[update.container_id] = api.ContainerUpdate()
                merged.CopyFrom(update)
            else:
                ignore = merged.ignore_failure and update.ignore_failure
                merged.MergeFrom(update)
                merged.ignore_failure = ignore  # NRI: the AND of every contributor's flag

    def update_list(self) -> list[api.ContainerUpdate]:
        return list(self.updates.values())
