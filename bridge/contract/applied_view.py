"""A reply part as a given runtime applies it, and what it leaves out, in words.

From the one table (bridge.contract.field_table, bridge.contract.runtime_effects): the leaves
a runtime ignores on the route are cleared, `memory.limit` sets `memory.swap` where the runtime
does so (an adjustment on every runtime, an update on containerd), and on NRI v0.11.0-v0.12.2 a
lone sysctl removal becomes what the runtime makes of it, the removal of the annotation of that
name. Each such leaf gives a `Notice` ("containerd 2.1.9 ignores memory.swappiness in an
adjustment"). The simulator applies the result, the test kit too, and `try`/`test` print the
notices; nothing shows an ignored leaf as effective.

Owns: the walk over the leaves a ContainerAdjustment or ContainerUpdate sets, the rewrite, and
the notices' JSON shape (`try --output json`'s and the test kit's `runtime` list).
Must not: decide what a runtime does (runtime_effects), log or count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message

from bridge.contract.adjustment import nri_adjustment_from_json
from bridge.contract.adjustment_fields import WALKED_PATHS
from bridge.contract.convert import from_json
from bridge.contract.field_table import RESOURCES, leaf_paths
from bridge.contract.runtime_effects import (
    ROUTE_PHRASES,
    Effect,
    Route,
    Runtime,
    effect_of,
    has_fact,
)
from bridge.contract.runtime_hazards import clear_at
from bridge.proto.nri import api_pb2 as api

M = TypeVar("M", api.ContainerAdjustment, api.ContainerUpdate)
SYSCTL = "linux.sysctl"
LIMIT = RESOURCES + "memory.limit"


@dataclass(frozen=True, slots=True)
class Notice:
    """One leaf the runtime does not apply as the reply says."""

    path: str
    effect: Effect
    text: str
    source: str  # "lab", "upstream", "assumed"


@dataclass(frozen=True, slots=True)
class AppliedView(Generic[M]):
    message: M  # what the runtime applies
    notices: tuple[Notice, ...]


def set_leaves(msg: Message) -> list[str]:
    """The leaf paths set in a ContainerAdjustment or a ContainerUpdate, in walk order."""
    if isinstance(msg, api.ContainerUpdate):
        if not msg.linux.HasField("resources"):
            return []
        return _walk(msg.linux.resources, RESOURCES)
    return _walk(msg, "")


def _walk(msg: Message, prefix: str) -> list[str]:
    out: list[str] = []
    for fd, value in msg.ListFields():
        path = prefix + fd.name
        if path in WALKED_PATHS:
            out += _walk(value, path + ".")
        else:
            out += leaf_paths(path, value)
    return out


def short(path: str) -> str:
    """How a leaf is named to people: `memory.swappiness`, `pids`, `linux.sysctl`."""
    return path.removeprefix(RESOURCES)


def as_applied(msg: M, route: Route, runtime: Runtime) -> AppliedView[M]:
    """`msg` as `runtime` applies it by `route`, and a notice for each leaf it does not."""
    out = type(msg)()
    out.CopyFrom(msg)
    notices: list[Notice] = []
    where = ROUTE_PHRASES[route]
    swap_from: int | None = None
    for path in set_leaves(msg):
        verdict = effect_of(path, route, runtime)
        if verdict.effect is Effect.IGNORED:
            clear_at(out, path)
            notices.append(Notice(path, verdict.effect,
                                  f"{runtime.label} ignores {short(path)} in {where}",
                                  verdict.source))
        elif verdict.effect is Effect.CRASHES:
            notices.append(Notice(path, verdict.effect,
                                  f"{runtime.label} crashes on {short(path)} in {where}",
                                  verdict.source))
        elif verdict.effect is Effect.SWAP_IS_LIMIT:
            swap_from = verdict_limit(out)
            if swap_from is not None:
                notices.append(Notice(path, verdict.effect,
                                      f"{runtime.label} sets memory.swap to memory.limit "
                                      f"({swap_from}) from {where}", verdict.source))
    if swap_from is not None:
        out.linux.resources.memory.swap.value = swap_from
    if isinstance(out, api.ContainerAdjustment) and has_fact(SYSCTL, route, runtime,
                                                             Effect.REMOVAL_LOST):
        notices += _lose_sysctl_removals(out, runtime, where)
    return AppliedView(out, tuple(notices))


def verdict_limit(msg: Any) -> int | None:
    """The memory limit that becomes the swap limit: a set, non-zero `memory.limit` (NRI's
    generator and containerd's WithResources both read 0 as "no limit")."""
    limit = msg.linux.resources.memory.limit.value
    return int(limit) if limit else None


def _lose_sysctl_removals(adjust: api.ContainerAdjustment, runtime: Runtime,
                          where: str) -> list[Notice]:
    sysctl = adjust.linux.sysctl
    lone = [key for key in sysctl if key.startswith("-") and key[1:] not in sysctl]
    notices = []
    for key in sorted(lone):
        del sysctl[key]
        adjust.annotations[key] = ""  # what NRI v0.11.0-v0.12.2's merge asks the runtime
        notices.append(Notice(SYSCTL, Effect.REMOVAL_LOST,
                              f"{runtime.label} loses the removal of sysctl {key[1:]} in {where}"
                              f" (it removes the annotation {key[1:]} instead)", "lab"))
    if not sysctl and not adjust.linux.ListFields():
        adjust.ClearField("linux")
    return notices


def notice_json(webhook: str, event: str, notice: Notice) -> dict[str, str]:
    """One entry of `try --output json`'s (and the test kit's) `runtime` list."""
    return {"webhook": webhook, "event": event, "field": notice.path,
            "effect": notice.effect.value, "message": notice.text, "source": notice.source}


def reply_notices(webhook: str, event: str, reply: dict[str, Any],
                  runtime: Runtime) -> list[dict[str, str]]:
    """What `runtime` does not apply as a webhook's JSON reply (`adjust`, `update`) says."""
    out: list[dict[str, str]] = []
    if reply.get("adjust"):
        view = as_applied(nri_adjustment_from_json(reply["adjust"]), Route.ADJUST, runtime)
        out += [notice_json(webhook, event, n) for n in view.notices]
    for item in reply.get("update") or []:
        update = from_json(item, api.ContainerUpdate)
        applied = as_applied(update, Route.UPDATE, runtime)
        out += [notice_json(webhook, event, n) for n in applied.notices]
    return out
