"""Pausing Python's cyclic garbage collector while a whole node is turned into objects.

Owns `paused_gc`, the one way both programs hold the collector off while they handle a document
the size of the node: the bridge's Synchronize (its payload and the webhook calls), the policy
server's answer to a large request (parse, evaluation, reply, until the reply is sent) and its
reconciler's parse and evaluation of the bridge's state. Such a document becomes ~30 tracked
objects per pod and container, all alive until it is done. CPython's collector, counting
allocations, runs full collections over the whole growing heap several times on the way, and at
thousands of pods they cost several times the parse itself
(docs/performance.md#numbers-behind-the-code). Nothing these sections build holds a reference
cycle (JSON trees, pydantic models, frozen dataclasses), so what dies is freed by reference
counting as usual; what survives is collected (or promoted) by the first collections after the
section, once the answer has left.

Must not: keep the collector paused past the section (an exception included), or turn it on
where a caller (or an enclosing section, or the embedding program) had it off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off for the `with` block, on again after it if it was on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
