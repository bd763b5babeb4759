"""Merge the contributions of several webhooks into one NRI answer, refusing conflicts.

Ownership follows NRI's own rules (protocol §7.2) at the granularity of one
field of one container: a map key (annotations, sysctl, unified, net devices),
a list entry's identity (env name, mount destination, device path, namespace
type, rlimit type, CDI name, hugepage size) or a single-owner field (each
cpu/memory sub-field, classes, oom score, cgroups path, args, ...). Hooks and
cgroup device rules are append-only and never conflict.

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

from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.guard import Contribution

CREATED = ""  # the container an adjustment applies to

# (container id, field, key); key is "" for single-owner fields.
Claim = tuple[str, str, str]
_Touch = tuple[str, str, bool]  # (field, key, is_removal)

_SINGLE_LINUX = ("cgroups_path", "oom_score_adj", "io_priority", "seccomp_policy", "scheduler",
                 "rdt", "memory_policy")


def _resource_touches(res: api.LinuxResources) -> Iterator[_Touch]:
    for sub in ("memory", "cpu", "pids"):
        if res.HasField(sub):
            for fd, _ in getattr(res, sub).ListFields():
                yield f"{sub}.{fd.name}", "", False
    for name in ("blockio_class", "rdt_class"):
        if res.HasField(name):
            yield name, "", False
    for limit in res.hugepage_limits:
        yield "hugepage_limits", limit.page_size, False
    for key in res.unified:
        yield "unified", key, False


def _keyed(fieldname: str, key: str) -> _Touch:
    return (fieldname, key[1:], True) if key.startswith("-") else (fieldname, key, False)


def _adjustment_touches(adj: api.ContainerAdjustment) -> Iterator[_Touch]:
    for key in adj.annotations:
        yield _keyed("annotations", key)
    for mount in adj.mounts:
        yield _keyed("mounts", mount.destination)
    for kv in adj.env:
        yield _keyed("env", kv.key)
    for rlimit in adj.rlimits:
        yield "rlimits", rlimit.type, False
    for cdi in adj.CDI_devices:
        yield "cdi_devices", cdi.name, False
    if adj.args:
        yield "args", "", False
    linux = adj.linux
    for dev in linux.devices:
        yield _keyed("devices", dev.path)
    for ns in linux.namespaces:
        yield _keyed("namespaces", ns.type)
    for key in linux.sysctl:
        yield _keyed("sysctl", key)
    for key in linux.net_devices:
        yield _keyed("net_devices", key)
    for fd, _ in linux.ListFields():
        if fd.name in _SINGLE_LINUX:
            yield fd.name, "", False
    if linux.HasField("resources"):
        yield from _resource_touches(linux.resources)


def claims_of(c: Contribution) -> set[Claim]:
    """The claims of one reply; refuses a reply that sets the same thing twice."""
    claims: set[Claim] = set()
    set_once: set[Claim] = set()
    touches: list[tuple[str, _Touch]] = []
    if c.adjust is not None:
        touches += [(CREATED, t) for t in _adjustment_touches(c.adjust)]
    for update in c.updates:
        touches += [(update.container_id, t) for t in _resource_touches(update.linux.resources)]
    for container, (name, key, removal) in touches:
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
