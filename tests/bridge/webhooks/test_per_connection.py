"""What is fixed per connection is derived once, at Configure, and each reply is walked once
(issue 44.4).

The runtime's name, version and NRI version do not change during a connection, so neither do
the leaves it applies per route, its hazards or the envelope's `runtime` object: the webhook
handler derives them when it is configured (bridge.contract.capabilities.ConnectedRuntime) and
an event only looks them up. The reply's leaf paths come from the guard's one walk
(bridge.webhooks.reply_walk), not from a second walk for the dropped-field check.

Counted, not timed: a profiler counts the calls of the table's functions over a few events.
"""

from __future__ import annotations

import cProfile
import dataclasses
import logging
import pstats
from collections.abc import Callable
from typing import Any

import pytest
import uvloop

from bridge.contract import applied_view, runtime_effects, runtime_hazards
from bridge.metrics import BridgeMetrics
from bridge.webhooks import reply_walk
from bridge.webhooks.webhook_handler import WebhookHandler

from .helpers import RUNTIME, context, request, spec
from .policy_double import Reply, Seen, policy_double

EVENTS = 5
# A reply setting leaves containerd 2.1.9 (NRI v0.8) ignores in an adjustment (swappiness,
# reservation) and applies (limit, shares), plus env: the dropped-field check has work to do.
def _reply(n: int) -> dict[str, Any]:
    return {"adjust": {"env": [{"key": "A", "value": str(n)}], "linux": {"resources": {
        "memory": {"limit": 1 << 30, "swappiness": 10, "reservation": 1 << 29},
        "cpu": {"shares": 512}}}}}


def _calls(profile: cProfile.Profile, *functions: Callable[..., Any]) -> dict[str, int]:
    codes = {(f.__code__.co_filename, f.__code__.co_firstlineno): f.__qualname__
             for f in functions}
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    out = dict.fromkeys(codes.values(), 0)
    for (filename, line, _), row in stats.items():
        name = codes.get((filename, line))
        if name is not None:
            out[name] += row[1]  # all calls, recursive ones included
    return out


async def _run(events: int, distinct: bool) -> tuple[dict[str, int], list[Any]]:
    """`events` CreateContainers after Configure; each reply different (`distinct`: none is
    one the webhook already checked, bridge.webhooks.checked) or all the same."""
    async with policy_double() as double:
        served = iter(range(1_000_000))

        async def answer(_: Seen) -> Reply:
            return Reply(json=_reply(next(served) if distinct else 0))
        double.route("/v1/policy", answer)
        handler = WebhookHandler([spec(sock=double.sock, allow=["env", "resources"])],
                                 BridgeMetrics())
        await handler.configure(RUNTIME)  # the connection's Configure
        answers = []
        call = dataclasses.replace(context("CreateContainer"), request=request("CreateContainer"))
        profile = cProfile.Profile()
        try:
            for _ in range(events):
                profile.enable()
                answers.append(await handler.handle(call))
                profile.disable()
        finally:
            await handler.aclose()
    return _calls(profile, runtime_effects.effect_of, runtime_effects.applied_leaves,
                  runtime_hazards.hazards_for, applied_view.set_leaves,
                  reply_walk.ReplyWalk._walk), answers


async def test_the_runtime_table_is_not_consulted_per_event() -> None:
    calls, answers = await _run(EVENTS, distinct=True)
    assert all(a.response is not None and a.reject is None for a in answers)
    # Configured before the profile starts: no event asks the field table or the hazards.
    assert calls["effect_of"] == 0, calls
    assert calls["applied_leaves"] == 0, calls
    assert calls["hazards_for"] == 0, calls


async def test_each_reply_is_walked_once() -> None:
    calls, _ = await _run(EVENTS, distinct=True)
    assert calls["set_leaves"] == 0, calls  # the dropped-field check reads the guard's walk
    # The guard's walk: the adjustment, its `linux`, `linux.resources`: three frames a reply.
    assert calls["ReplyWalk._walk"] == 3 * EVENTS, calls


async def test_a_reply_already_checked_is_not_walked_again() -> None:
    calls, answers = await _run(EVENTS, distinct=False)
    assert len(answers) == EVENTS and all(a.response is not None for a in answers)
    assert calls["ReplyWalk._walk"] == 3, calls  # the first event's; then the checked reply
    assert calls["set_leaves"] == 0 and calls["effect_of"] == 0, calls



def test_latencies_have_sub_millisecond_resolution_under_uvloop(
        caplog: pytest.LogCaptureFixture) -> None:
    """The bridge runs on uvloop, whose loop.time() counts whole milliseconds: a webhook call
    over a Unix socket took `latency_ms=0.0` most of the time (12,683 of 15,000 in the trial).
    Each call's latency is measured with perf_counter: never 0.0, and not whole milliseconds."""
    async def calls() -> None:
        await _run(EVENTS * 4, distinct=True)

    with caplog.at_level(logging.INFO, logger="bridge.webhooks.webhook_handler"):
        uvloop.run(calls())
    latencies = [r.__dict__["latency_ms"] for r in caplog.records
                 if r.getMessage() == "webhook call"]
    assert len(latencies) == EVENTS * 4
    assert all(ms > 0 for ms in latencies), latencies
    assert any(ms != round(ms) for ms in latencies), latencies
