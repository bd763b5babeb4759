"""Merge the contributions of several webhooks into one NRI answer, refusing conflicts.

Ownership follows NRI's own rules (docs/protocol.md#ownership-and-conflicts) at the granularity of
one field of one container: a map key (annotations, sysctl, unified, net devices),
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

from dataclasses import dataclass, field

from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.guard import Contribution
from bridge.webhooks.reply_walk import Claim, describe_claim


@dataclass(slots=True)
class Merger:
    """Accumulates checked contributions in webhook order."""

    owners: dict[Claim, str] = field(default_factory=dict)
    adjust: api.ContainerAdjustment | None = None
    updates: dict[str, api.ContainerUpdate] = field(default_factory=dict)

    def check(self, c: Contribution) -> set[Claim]:
        """Raise WebhookFailure(CONFLICT) naming both webhooks, or return c's claims (found
        by the reply walk); a reply that sets the same thing twice is INVALID."""
        walk = c.walked
        if walk.duplicate is not None:
            raise WebhookFailure(FailureKind.INVALID,
                                 f"reply sets {describe_claim(walk.duplicate)} more than once")
        claims = walk.claims
        for claim in sorted(claims):
            owner = self.owners.get(claim)
            if owner is not None:
                raise WebhookFailure(FailureKind.CONFLICT, f'webhooks "{owner}" and '
                                     f'"{c.webhook}" both tried to set {describe_claim(claim)}')
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
