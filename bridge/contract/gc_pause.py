"""Pausing Python's cyclic garbage collector while a whole node is turned into objects.

Owns `paused_gc`, the one way both programs build or parse a document the size of the node (the
bridge's Synchronize payload, the policy server's strict parse of a Synchronize request and of
the bridge's state). Such a document becomes ~30 tracked objects per pod and container, and all
of them live until it is done. CPython's collector, counting allocations, would run full
collections over the whole growing heap several times on the way, and once it is done, a young
collection walking all the new objects at once: measured at 5,000 pods on CPython 3.11, six full
collections took 1.46 s of a 2.24 s parse; paused, the parse takes 0.41 s, plus 0.2 s for that
young collection afterwards (docs/performance.md, node scale). So the collector is off for the
section, and what the section made is then moved, unscanned, into the oldest generation
(`gc.freeze()` then `gc.unfreeze()`, both list splices): what survives is long-lived (the node
view keeps it), what does not is freed by reference counting, as nothing these sections build
holds a reference cycle (JSON trees, pydantic models, frozen dataclasses). Cycles that other
code made meanwhile are collected by the next full collection instead of a young one.

For bulk sections only: around every small request, the promotion would keep young collections
from ever running.

Must not: keep the collector paused past the section (an exception included), turn it on where
a caller (or the embedding program) had it off, or unfreeze objects someone else froze.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off for the `with` block; what it allocated goes to the
    oldest generation; the collector is on again after it if it was on before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()
