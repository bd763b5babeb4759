"""Noticing that the runtime's NRI socket is back, instead of waiting out a backoff.

When the runtime restarts it deletes its socket and creates a new one (protocol
docs/protocol.md#external-plugins). A plugin that only retries on an exponential backoff can sit out
up to its maximum delay (30 s) after the runtime is back, and every pod created in that time
gets no policy. So while disconnected the runner waits on the socket path: the
wait ends at once when a socket appears there that is not the one the last
attempt used (a different device/inode/ctime), and otherwise after the backoff
delay, as before.

The check is a stat() of the path every POLL_S (0.1 s) while disconnected and
nothing while connected: the standard library has no inotify, and a tenth of a
second is well inside the one second we promise. The identity includes ctime
because a new socket can reuse the inode number of the one just deleted.

Owns: the socket's identity and the wait. Must not: connect (connect.py does).
"""

from __future__ import annotations

import asyncio
import os
import stat

POLL_S = 0.1

SocketId = tuple[int, int, int]  # (st_dev, st_ino, st_ctime_ns)


def socket_identity(path: str) -> SocketId | None:
    """Who the socket at `path` is, or None if there is no socket there."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(info.st_mode):
        return None
    return info.st_dev, info.st_ino, info.st_ctime_ns


async def wait_for_new_socket(path: str, seen: SocketId | None, timeout_s: float,
                              poll_s: float = POLL_S) -> bool:
    """Wait up to `timeout_s`; True as soon as a socket other than `seen` is at `path`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, timeout_s)
    while True:
        current = socket_identity(path)
        if current is not None and current != seen:
            return True
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(poll_s, remaining))
