"""Runtime calls of ours that have not returned: a stuck call is seen, not just suffered.

A call the bridge makes to the runtime (NRI RegisterPlugin and UpdateContainers, CRI
UpdateContainerResources and Version) is wrapped in `CallWatch.track(name, detail)`. A call
still open `stuck_after_s` after it started is *stuck*: it logs one warning naming the call and its
detail (the runtime may be deadlocked: a plugin-initiated UpdateContainers takes containerd's
locks in the inverse order of lifecycle events,
docs/protocol.md#unsolicited-updates-and-the-runtimes-locks), it is counted once per call in
`became_stuck`, and `stuck()` lists it until it returns (the control API's `/readyz` body and
the metrics read that at request and scrape time). When a stuck call finally returns, one info
line says so with its duration.

One watch per bridge: the runner's (`PluginRunner.calls`), handed to the session and its
update route. A call name is declared once (`declare`), so its metric exists at 0, and each
call runs inside `with calls.track(name, detail): ...`.

Owns: the open calls, the threshold, the stuck-call log lines and counts.
Must not: import other bridge modules, make calls itself, or block: `track` is a plain
context manager that works in async code (the threshold is a loop timer when a loop runs;
`stuck()` also checks, so a caller with its own clock needs no loop).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

# containerd answers a healthy UpdateContainers in milliseconds, and RegisterPlugin before its
# registration timeout (5 s, which our call waits too, so an unanswered one shows as stuck just
# before it times out). A call open for 5 s is not slow, it is stuck.
STUCK_AFTER_S = 5.0


@dataclass(frozen=True, slots=True)
class StuckCall:
    call: str
    detail: str
    seconds: float


@dataclass(slots=True, eq=False)
class _Open:
    call: str
    detail: str
    started: float
    stuck: bool = False
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class CallWatch:
    """The runtime calls in flight, and which of them are stuck."""

    def __init__(self, stuck_after_s: float = STUCK_AFTER_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stuck_after_s = stuck_after_s
        self._clock = clock
        self._open: dict[_Open, None] = {}  # in start order: the oldest is marked first
        # Calls that became stuck, by name; every declared or tracked name has an entry, so
        # the metric exists at 0 before the first one (Prometheus' increase() needs that).
        self.became_stuck: dict[str, int] = {}

    def declare(self, *calls: str) -> None:
        """Name calls up front, so their counters exist before the first call."""
        for call in calls:
            self.became_stuck.setdefault(call, 0)

    @contextmanager
    def track(self, call: str, detail: str = "") -> Iterator[None]:
        """Watch one call for the duration of the `with` block."""
        self.declare(call)
        entry = _Open(call, detail, self._clock())
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            entry.timer = loop.call_later(self.stuck_after_s, self._mark, entry)
        self._open[entry] = None
        try:
            yield
        finally:
            del self._open[entry]
            if entry.timer is not None:
                entry.timer.cancel()
            if entry.stuck:
                log.info("runtime call returned after being stuck", extra={
                    "call": call, "detail": detail,
                    "seconds": round(self._clock() - entry.started, 3)})

    def stuck(self) -> list[StuckCall]:
        """The calls open for `stuck_after_s` or longer, longest first."""
        now = self._clock()
        for entry in self._open:
            if not entry.stuck and now - entry.started >= self.stuck_after_s:
                self._mark(entry)
        return sorted((StuckCall(e.call, e.detail, round(now - e.started, 3))
                       for e in self._open if e.stuck), key=lambda s: -s.seconds)

    def stuck_now(self) -> dict[str, int]:
        """Calls stuck right now by name, 0 for every other name known (the metric's gauge)."""
        counts = dict.fromkeys(self.became_stuck, 0)
        for s in self.stuck():
            counts[s.call] += 1
        return counts

    def _mark(self, entry: _Open) -> None:
        # The loop timer fires once per call; stuck() may have been first.
        if entry.stuck or entry not in self._open:
            return
        entry.stuck = True
        self.became_stuck[entry.call] = self.became_stuck.get(entry.call, 0) + 1
        seconds = self._clock() - entry.started
        log.warning("runtime call %s has not returned after %.1fs", entry.call, seconds, extra={
            "call": entry.call, "detail": entry.detail, "seconds": round(seconds, 3),
            "action": "the runtime may be deadlocked; see docs/operations.md#stuck-runtime-calls"})
