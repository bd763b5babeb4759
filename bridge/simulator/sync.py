"""Splitting Synchronize into `more` chunks, the way an NRI v0.7+ runtime does.

The runtime first tries one message with everything. Only when its own ttrpc
refuses to *send* a message (marshalled request > 4 MiB) does it shrink the
number of objects per message by `min(0.9, limit / rejected length)`, slicing
pods and containers independently, never below 4 + 4 objects, and retrying
from the same position (docs/protocol.md#synchronize). Every chunk but the last has
`more=true`; the plugin must answer those with `more=true` and no updates.

Sans-IO: `SyncSplitter` produces requests and is told what happened to them.
"""

from __future__ import annotations

from collections.abc import Sequence

from bridge.proto.nri import api_pb2 as api

MIN_OBJECTS_PER_MESSAGE = 8
MAX_SHRINK_FACTOR = 0.9


class SyncTooLarge(Exception):
    """The state cannot be split any further; the runtime gives up on the plugin."""


class SyncSplitter:
    """Walks through pods and containers, one chunk per accepted request."""

    def __init__(self, pods: Sequence[api.PodSandbox], containers: Sequence[api.Container]) -> None:
        self._pods = list(pods)
        self._containers = list(containers)
        self._pods_per_msg = len(self._pods)
        self._ctrs_per_msg = len(self._containers)
        self.shrinks = 0

    def request(self) -> api.SynchronizeRequest:
        """The next chunk to send."""
        pods = self._pods[: self._pods_per_msg]
        containers = self._containers[: self._ctrs_per_msg]
        more = len(self._pods) > len(pods) or len(self._containers) > len(containers)
        return api.SynchronizeRequest(pods=pods, containers=containers, more=more)

    def rejected(self, size: int, limit: int) -> None:
        """The last request was `size` bytes, above `limit`: shrink and retry."""
        total = self._pods_per_msg + self._ctrs_per_msg
        if total <= MIN_OBJECTS_PER_MESSAGE:
            raise SyncTooLarge(
                f"cannot split Synchronize below {total} objects ({size} > {limit} bytes)")
        factor = min(MAX_SHRINK_FACTOR, limit / size)
        pods = int(self._pods_per_msg * factor)
        ctrs = int(self._ctrs_per_msg * factor)
        if pods + ctrs < MIN_OBJECTS_PER_MESSAGE:
            pods = ctrs = MIN_OBJECTS_PER_MESSAGE // 2
        self._pods_per_msg, self._ctrs_per_msg = pods, ctrs
        self.shrinks += 1

    def accepted(self) -> bool:
        """The last request was answered correctly; returns True when everything is sent."""
        self._pods = self._pods[self._pods_per_msg:]
        self._containers = self._containers[self._ctrs_per_msg:]
        self._pods_per_msg = min(self._pods_per_msg, len(self._pods))
        self._ctrs_per_msg = min(self._ctrs_per_msg, len(self._containers))
        done = not self._pods and not self._containers
        if not done and self._pods_per_msg + self._ctrs_per_msg == 0:
            # One kind was shrunk to 0 per message and the other is used up:
            # keep making progress instead of sending empty chunks forever.
            half = MIN_OBJECTS_PER_MESSAGE // 2
            self._pods_per_msg = min(half, len(self._pods))
            self._ctrs_per_msg = min(half, len(self._containers))
        return done
