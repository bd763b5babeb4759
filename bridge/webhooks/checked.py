"""Replies that already passed a contract check, remembered by their exact bytes.

The bridge checks every reply against the contract before it merges it (the reply guard). The
same bytes always get the same verdict, and most events get one of a few answers (`{}`, the
same env or resources for every container), so it remembers the replies that passed, with what
the check gave. Owns only the bounded memory: which replies may be remembered (and under which
key) is the caller's decision. Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_ENTRIES = 256
MAX_BYTES = 4096  # bigger replies (a Synchronize's updates) are checked every time


class CheckedReplies(Generic[K, V]):
    """At most `entries` replies of at most `max_bytes` each; the oldest make room."""

    def __init__(self, entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self._entries = entries
        self._max_bytes = max_bytes
        self._items: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def remember(self, key: K, body: bytes, checked: V) -> None:
        """Keep `checked` under `key` if `body` (the reply's bytes) is small enough."""
        if len(body) > self._max_bytes:
            return
        if len(self._items) >= self._entries:
            del self._items[next(iter(self._items))]  # the oldest
        self._items[key] = checked

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)
