"""The stop-signal latch in-process: it records, wakes, and gives the signals back."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from types import FrameType

import pytest

from bridge.process_setup import stop_signals


@pytest.fixture
def received() -> Iterator[list[int]]:
    """SIGTERM's handler before the latch: it records what reaches it."""
    got: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    before = signal.signal(signal.SIGTERM, record)
    try:
        yield got
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_stop_signal_is_recorded_and_wakes_not_raises(received: list[int]) -> None:
    woken: list[str] = []
    with stop_signals.held(process=False):
        assert stop_signals.stop_requested() is None
        with stop_signals.waking(lambda: woken.append("woken")):
            signal.raise_signal(signal.SIGTERM)
            assert stop_signals.stop_requested() == signal.SIGTERM
            assert woken == ["woken"]
        with stop_signals.waking(lambda: woken.append("at once")):
            assert woken == ["woken", "at once"]  # one had arrived already
    # In-process: the previous handler is back, the latch is empty, nothing leaked to it.
    assert received == [] and stop_signals.stop_requested() is None
    signal.raise_signal(signal.SIGTERM)
    assert received == [signal.SIGTERM]


def test_release_hands_a_received_signal_to_the_previous_handler(received: list[int]) -> None:
    stop_signals.catch()
    signal.raise_signal(signal.SIGTERM)
    assert received == []
    stop_signals.release()
    assert received == [signal.SIGTERM]
    assert stop_signals.stop_requested() is None
    stop_signals.release()  # nothing caught: nothing happens
    assert received == [signal.SIGTERM]


def test_a_parent_blocked_signal_reaches_the_latch(received: list[int]) -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        signal.raise_signal(signal.SIGTERM)  # pending
        with stop_signals.held(process=False):
            assert stop_signals.stop_requested() == signal.SIGTERM
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    assert received == []
