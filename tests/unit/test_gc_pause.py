"""bridge.contract.gc_pause: the collector is off inside the block and as it was after it, and
what the block built is in the oldest generation, never scanned by a young collection."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from bridge.contract.gc_pause import paused_gc


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gc.unfreeze()
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


def test_what_the_block_built_is_in_the_oldest_generation() -> None:
    gc.enable()
    with paused_gc():
        built = [[i] for i in range(1000)]  # lists: always tracked
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(built) in oldest and all(id(item) in oldest for item in built)
    assert gc.get_count()[0] < 1000  # the young generation does not hold them


def test_objects_someone_froze_stay_frozen() -> None:
    gc.enable()
    gc.freeze()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    with paused_gc():
        _ = [{"pod": i} for i in range(100)]
    assert gc.get_freeze_count() == frozen
    assert gc.isenabled()
