"""bridge.process_setup.gc_pause: the collector is off inside the block and as it was after it, also
when sections overlap (the bridge's and the policy server's sections span awaits)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from bridge.process_setup.gc_pause import paused_gc


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_off_inside_on_after() -> None:
    gc.enable()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_on_again_after_an_exception() -> None:
    gc.enable()
    with pytest.raises(ValueError, match="boom"), paused_gc():
        raise ValueError("boom")
    assert gc.isenabled()


def test_left_off_when_it_was_off() -> None:
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_an_inner_section_leaves_it_to_the_outer_one() -> None:
    gc.enable()
    with paused_gc():
        with paused_gc():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_sections_end_with_the_collector_on() -> None:
    # Two coroutines: the first pauses, the second pauses, the first ends, then the second.
    gc.enable()
    first, second = paused_gc(), paused_gc()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    second.__exit__(None, None, None)
    assert gc.isenabled()
