"""bridge.call_watch: a runtime call that has not returned is listed, counted and logged once.

A controllable clock decides when a call is stuck (no sleeping); the loop-timer path is
driven by the event loop itself (a threshold of 0 fires on the next loop turns).
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from bridge.call_watch import CallWatch, StuckCall
from bridge.metrics import BridgeMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "bridge.call_watch" and r.levelno == level]


def test_a_call_is_stuck_only_from_the_threshold_on(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    watch = CallWatch(stuck_after_s=5.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="bridge.call_watch"), \
            watch.track("UpdateContainers", "3 containers"):
        clock.now += 4.999
        assert watch.stuck() == []
        assert watch.became_stuck == {"UpdateContainers": 0}
        clock.now += 0.001
        assert watch.stuck() == [StuckCall("UpdateContainers", "3 containers", 5.0)]
        clock.now += 2.5
        assert watch.stuck() == [StuckCall("UpdateContainers", "3 containers", 7.5)]
        assert watch.stuck_now() == {"UpdateContainers": 1}
        clock.now += 1.0
    assert watch.stuck() == []
    assert watch.stuck_now() == {"UpdateContainers": 0}
    assert watch.became_stuck == {"UpdateContainers": 1}
    [warning] = _lines(caplog, logging.WARNING)  # one line, however often it was looked at
    assert warning.getMessage() == "runtime call UpdateContainers has not returned after 5.0s"
    assert (warning.call, warning.detail, warning.seconds) == (  # type: ignore[attr-defined]
        "UpdateContainers", "3 containers", 5.0)
    [info] = _lines(caplog, logging.INFO)
    assert info.getMessage() == "runtime call returned after being stuck"
    assert (info.call, info.seconds) == ("UpdateContainers", 8.5)  # type: ignore[attr-defined]


def test_a_call_that_returns_in_time_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    watch = CallWatch(stuck_after_s=5.0, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="bridge.call_watch"):
        with watch.track("RegisterPlugin"):
            clock.now += 4.0
        clock.now += 10.0
        assert watch.stuck() == []
    assert watch.became_stuck == {"RegisterPlugin": 0}
    assert not _lines(caplog, logging.WARNING) and not _lines(caplog, logging.INFO)


def test_a_call_that_raises_is_no_longer_open() -> None:
    clock = Clock()
    watch = CallWatch(stuck_after_s=1.0, clock=clock)
    with pytest.raises(TimeoutError), watch.track("UpdateContainers"):
        clock.now += 2.0
        assert len(watch.stuck()) == 1
        raise TimeoutError
    assert watch.stuck() == []


def test_each_stuck_call_is_counted_once_longest_first(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    watch = CallWatch(stuck_after_s=5.0, clock=clock)
    watch.declare("RegisterPlugin")
    with caplog.at_level(logging.WARNING, logger="bridge.call_watch"), \
            watch.track("UpdateContainers", "1 containers"):
        clock.now += 3.0
        with watch.track("UpdateContainers", "2 containers"):
            clock.now += 5.0
            assert watch.stuck() == [StuckCall("UpdateContainers", "1 containers", 8.0),
                                     StuckCall("UpdateContainers", "2 containers", 5.0)]
            assert watch.stuck_now() == {"RegisterPlugin": 0, "UpdateContainers": 2}
    assert watch.became_stuck == {"RegisterPlugin": 0, "UpdateContainers": 2}
    assert [r.detail for r in _lines(caplog, logging.WARNING)] == [  # type: ignore[attr-defined]
        "1 containers", "2 containers"]


async def test_the_loop_timer_logs_without_anyone_looking(
        caplog: pytest.LogCaptureFixture) -> None:
    # Nobody calls stuck(): the timer started by track() marks the call on its own.
    watch = CallWatch(stuck_after_s=0.0)
    release = asyncio.Event()

    async def call() -> None:
        with watch.track("UpdateContainers", "1 containers"):
            await release.wait()

    with caplog.at_level(logging.INFO, logger="bridge.call_watch"):
        task = asyncio.create_task(call())
        for _ in range(3):  # the task enters track(); the timer (delay 0) runs on a later turn
            await asyncio.sleep(0)
        assert watch.became_stuck == {"UpdateContainers": 1}
        assert len(_lines(caplog, logging.WARNING)) == 1
        release.set()
        await task
    assert len(_lines(caplog, logging.WARNING)) == 1
    assert len(_lines(caplog, logging.INFO)) == 1
    assert watch.stuck() == []


async def test_a_call_that_returns_first_cancels_its_timer(
        caplog: pytest.LogCaptureFixture) -> None:
    watch = CallWatch(stuck_after_s=0.0)
    with caplog.at_level(logging.INFO, logger="bridge.call_watch"):
        with watch.track("UpdateContainers"):
            pass  # returns before the loop ever runs the timer
        for _ in range(3):
            await asyncio.sleep(0)
    assert watch.became_stuck == {"UpdateContainers": 0}
    assert not caplog.records


def test_the_metrics_read_the_watch_at_scrape_time() -> None:
    clock = Clock()
    watch = CallWatch(stuck_after_s=5.0, clock=clock)
    watch.declare("RegisterPlugin")
    metrics = BridgeMetrics()
    metrics.watch_calls(watch.stuck_now, lambda: watch.became_stuck)
    prefix = "nri_webhook_bridge_runtime_calls"
    text = metrics.exposition().decode()
    assert f'{prefix}_stuck{{call="RegisterPlugin"}} 0.0' in text
    assert f'{prefix}_became_stuck_total{{call="RegisterPlugin"}} 0.0' in text
    with watch.track("UpdateContainers"):
        clock.now += 6.0
        text = metrics.exposition().decode()
        assert f'{prefix}_stuck{{call="UpdateContainers"}} 1.0' in text
        assert f'{prefix}_became_stuck_total{{call="UpdateContainers"}} 1.0' in text
    text = metrics.exposition().decode()
    assert f'{prefix}_stuck{{call="UpdateContainers"}} 0.0' in text
    assert f'{prefix}_became_stuck_total{{call="UpdateContainers"}} 1.0' in text
