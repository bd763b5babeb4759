"""uvicorn's httptools protocol, with a response's writes leaving in one ``write`` syscall.

uvicorn writes the status line and headers when the app sends ``http.response.start`` and the
body when it sends ``http.response.body``: two ``write`` calls on the socket, so the bridge
wakes up for the headers and again for the body (the header write alone was a visible share of
the server's profile: docs/performance.md#numbers-behind-the-code). Here every
write of a loop step is held and sent together at the end of that step: an app that sends
both messages without waiting in between (the hot route) answers with one ``write``, and a
streaming app still gets each chunk out within the same loop iteration. uvicorn is handed the
wrapper as its transport in ``connection_made`` (the asyncio protocol contract) and picks the
class through ``uvicorn.Config(http=...)``; nothing inside uvicorn is replaced. Owns nothing
else: parsing, keep-alive and flow control are uvicorn's, through the wrapper to the real
transport; the timeouts and the connection cap are bridge.listening's, whose protocol this
extends.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from bridge.listening.bounded_protocol import BoundedHttpToolsProtocol


class _HeldWrites:
    """The connection's transport, with writes gathered until the end of the loop step."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(bytes(data))

    def flush(self) -> None:
        held, self._held = self._held, []
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()  # a response written just before the close still goes out first
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        # Everything else (is_closing, get_extra_info, pause_reading, abort, ...) unchanged.
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(BoundedHttpToolsProtocol):
    """``uvicorn.Config(http=protocol_class(bounds, CoalescingHttpToolsProtocol))``: the
    listener's bounds (header timeout, connection cap: bridge.listening.bounded_protocol)
    come with it."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # The real transport still calls this protocol back (data, pause/resume writing).
        held = _HeldWrites(transport, asyncio.get_running_loop())
        super().connection_made(cast(asyncio.Transport, held))
