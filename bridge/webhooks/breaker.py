"""Per-webhook circuit breaker: a dead policy must not cost every pod its timeout.

State table (`_TRANSITIONS` below is the same table, in code):

| state     | admit()                                   | success  | failure                       |
|-----------|-------------------------------------------|----------|-------------------------------|
| closed    | yes                                       | closed   | closed, or open at threshold  |
| open      | no; after the cool-down: half-open, probe | -        | -                             |
| half-open | no (one probe is already in flight)       | closed   | open (cool-down restarts)     |

Only unavailability (timeouts, refused connections, 5xx, garbage) counts as a
failure; a fast but bad decision does not. The caller reports the outcome of
every admitted call exactly once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import Enum

log = logging.getLogger(__name__)


class CircuitState(Enum):
    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


class Signal(Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    TRIP = "trip"  # failure that reached the threshold
    COOLED = "cooled"  # cool-down elapsed, let one probe through


_TRANSITIONS: dict[tuple[CircuitState, Signal], CircuitState] = {
    (CircuitState.CLOSED, Signal.SUCCESS): CircuitState.CLOSED,
    (CircuitState.CLOSED, Signal.FAILURE): CircuitState.CLOSED,
    (CircuitState.CLOSED, Signal.TRIP): CircuitState.OPEN,
    (CircuitState.OPEN, Signal.COOLED): CircuitState.HALF_OPEN,
    (CircuitState.HALF_OPEN, Signal.SUCCESS): CircuitState.CLOSED,
    (CircuitState.HALF_OPEN, Signal.FAILURE): CircuitState.OPEN,
    (CircuitState.HALF_OPEN, Signal.TRIP): CircuitState.OPEN,
}


class CircuitBreaker:
    def __init__(self, name: str, failure_threshold: int, cool_down_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.failure_threshold = failure_threshold
        self.cool_down_s = cool_down_s
        self._clock = clock
        self.state = CircuitState.CLOSED
        self.consecutive_failures = 0
        self._opened_at = 0.0

    def admit(self) -> bool:
        """Whether a call may go out now."""
        if self.state is CircuitState.CLOSED:
            return True
        if self.state is CircuitState.OPEN and self._clock() - self._opened_at >= self.cool_down_s:
            self._move(Signal.COOLED)
            return True  # the probe
        return False

    def record(self, ok: bool) -> None:
        """Report how an admitted call went (ok = the service answered usefully)."""
        if self.state is CircuitState.OPEN:
            return  # a straggler admitted before the circuit opened
        if ok:
            self.consecutive_failures = 0
            self._move(Signal.SUCCESS)
            return
        self.consecutive_failures += 1
        tripped = (self.state is CircuitState.HALF_OPEN
                   or self.consecutive_failures >= self.failure_threshold)
        self._move(Signal.TRIP if tripped else Signal.FAILURE)

    def _move(self, signal: Signal) -> None:
        before = self.state
        after = _TRANSITIONS[(before, signal)]
        self.state = after
        if after is CircuitState.OPEN and before is not CircuitState.OPEN:
            self._opened_at = self._clock()
            log.warning("circuit opened after %d consecutive failures; calls skipped for %.1fs",
                        self.consecutive_failures, self.cool_down_s,
                        extra={"webhook": self.name, "circuit": "open"})
        elif after is not before:
            log.info("circuit %s", after.name.lower().replace("_", "-"),
                     extra={"webhook": self.name, "circuit": after.name.lower()})
