"""uvicorn's httptools protocol with bounds: a header timeout, a body timeout, a cap on the
header bytes and on the connections of one listener, and the peer's credentials in the scope.

uvicorn has an idle (keep-alive) timeout but none for a request that arrives slowly: a client
that sends one header byte a second held its connection forever (slowloris), and every
connection it opened stayed. Here a request's headers must arrive within `header_timeout_s` of
the connection (or of the request's first byte on a kept-alive connection) and its body within
`body_timeout_s` of the headers, or the connection is closed. A listener already holding
`max_connections` closes a new one at once, so a flood on one listener (the TCP control
address, a metrics port) leaves the others (the Unix socket the liveness probe uses) alone.

The peer's SO_PEERCRED (peer_creds) is read once per connection and put in each request's
scope under `PEER_KEY`; http_guard checks it. Parsing, keep-alive and flow control stay
uvicorn's: this subclasses its `HttpToolsProtocol` (pinned range in pyproject.toml, checked by
tests/policy_server/http_edge/test_uvicorn_pin.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, ClassVar, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from bridge.listening.listener_config import Bounds
from bridge.listening.peer_creds import PeerCreds, peer_creds

log = logging.getLogger(__name__)

PEER_KEY = "nwb.peer"  # scope key: PeerCreds of a Unix-socket peer, absent on TCP
MAX_HEADER_BYTES = 64 << 10  # request line and headers together
CAP_LOG_INTERVAL_S = 10.0
_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\n"
              b"content-length: 26\r\nconnection: close\r\n\r\nrequest headers too large\n")


class _HeadersTooLarge(Exception):
    pass


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """`protocol_class(bounds)` makes the subclass a listener serves with."""

    bounds: ClassVar[Bounds] = Bounds()
    _last_cap_log: ClassVar[float] = 0.0
    _refused_at_cap: ClassVar[int] = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._peer: PeerCreds | None = None
        self._header_bytes = 0
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.bounds.max_connections:
            self._refused = True
            self._note_cap()
            transport.abort()  # freed now; a flood gets resets, not held sockets
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                self._peer = peer_creds(sock)
            except OSError:
                self._peer = None
        self._arm(self.bounds.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        if not self._refused:
            super().send_400_response(msg)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        if self._peer is not None:
            cast(dict[str, Any], self.scope)[PEER_KEY] = self._peer
        if self._deadline is None:  # a kept-alive connection's next request
            self._arm(self.bounds.header_timeout_s)

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._arm(self.bounds.body_timeout_s)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def _count(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > MAX_HEADER_BYTES and not self._refused:
            self._refused = True
            self.transport.write(_TOO_LARGE)
            self.transport.close()
            raise _HeadersTooLarge  # stops the parser; uvicorn's 400 is suppressed above

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()  # the app, if it was reading the body, sees a disconnect

    @classmethod
    def _note_cap(cls) -> None:
        cls._refused_at_cap += 1
        now = time.monotonic()
        if now - cls._last_cap_log >= CAP_LOG_INTERVAL_S:
            cls._last_cap_log = now
            log.warning("listener at its connection cap (%d): %d connections refused so far",
                        cls.bounds.max_connections, cls._refused_at_cap)


def protocol_class(bounds: Bounds, base: type[BoundedHttpToolsProtocol] = BoundedHttpToolsProtocol
                   ) -> type[BoundedHttpToolsProtocol]:
    """The protocol class for one listener (`uvicorn.Config(http=...)`); its own connection
    count comes from the uvicorn server it runs in: one server per listener."""
    return type(base.__name__, (base,), {"bounds": bounds, "_last_cap_log": 0.0,
                                         "_refused_at_cap": 0})
