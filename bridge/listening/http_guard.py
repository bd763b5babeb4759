"""The ASGI layer in front of every app a listener serves: it decides whether a request reaches
the app at all, and marks whether the peer may read environment values.

In order, per request (the peer's credentials come once per connection, bounded_protocol):
1. a Unix-socket peer whose uid/gid the `PeerRule` does not allow: 403;
2. with a bearer token: `Authorization: Bearer <token>` compared in constant time, else 401;
3. on TCP a `Host` that is not one of the listener's own names (loopback, the bind address,
   configured ones), and on any listener an `Origin` that is not: 403 (DNS rebinding and
   cross-site requests; a browser cannot reach a Unix socket, so Host is not checked there);
4. a state-changing method (anything but GET and HEAD) without `Content-Type:
   application/json`: 415, also when the header is absent;
5. a body larger than the path's limit: 413, from `Content-Length` before reading, or once
   the streamed body passes it; the connection is closed after either.
Then `ENV_READER_KEY` in the scope says whether the peer may see environment values.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bridge.listening.bounded_protocol import PEER_KEY
from bridge.listening.listener_config import LOOPBACK_NAMES, Bounds
from bridge.listening.peer_creds import PeerCreds, PeerRule

ENV_READER_KEY = "nwb.env_reader"
_SAFE_METHODS = frozenset({"GET", "HEAD"})
_BEARER = b"bearer "
_JSON = b"application/json"
_DISCARD_BYTES = 64 << 10  # a refused request body up to this is read and dropped


@dataclass(frozen=True, slots=True)
class GuardSettings:
    bounds: Bounds
    peer_rule: PeerRule | None = None  # Unix listeners: None allows every peer (metrics)
    token: bytes | None = None
    check_host: bool = False  # TCP listeners that read or change node state
    check_origin: bool = True
    json_only: bool = True  # state changes only as application/json (off: read-only apps)
    allowed_hosts: frozenset[str] = LOOPBACK_NAMES
    env_reader_uids: frozenset[int] = frozenset({0})
    env_over_tcp: bool = False  # authenticated TCP peers read environment values


def allowed_names(bind_host: str | None, extra: Iterable[str]) -> frozenset[str]:
    """Loopback names, the bind host unless it is a wildcard, and `extra`, lower case."""
    names = set(LOOPBACK_NAMES) | {e.lower().strip("[]") for e in extra}
    if bind_host and bind_host not in ("0.0.0.0", "::", ""):
        names.add(bind_host.lower().strip("[]"))
    return frozenset(names)


def host_name(value: str) -> str:
    """`host`, `host:port`, `[v6]:port` -> the lower-case host without brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


def origin_host(origin: str) -> str | None:
    """The host of an `Origin` header (`scheme://host[:port]`); None for `null` or junk."""
    scheme, sep, rest = origin.strip().partition("://")
    if not sep or not scheme or not rest or "/" in rest:
        return None
    return host_name(rest)


async def _refuse(send: Send, status: int, message: str,
                  extra: tuple[tuple[bytes, bytes], ...] = (), close: bool = True) -> None:
    body = orjson.dumps({"error": message})
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode()), *extra]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class ListenerGuard:
    """ASGI middleware: `ListenerGuard(app, GuardSettings(...))`."""

    def __init__(self, app: ASGIApp, settings: GuardSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = dict(scope["headers"])  # one pass; names are lower case
        declared = headers.get(b"content-length")
        problem = self.check(scope, headers)
        if problem is not None:
            status, message = problem
            extra = ((b"www-authenticate", b"Bearer"),) if status == 401 else ()
            # A small body the client may still be sending is left to the parser to discard
            # (closing now would break the client's pipe before it reads the refusal); a large
            # or chunked one is not read: the connection closes.
            small = (declared.isdigit() and int(declared) <= _DISCARD_BYTES if declared is not None
                     else b"transfer-encoding" not in headers)
            await _refuse(send, status, message, extra, close=not small)
            return
        limit = self.settings.bounds.body_limit(scope["path"])
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _refuse(send, 413, f"body larger than {limit} bytes")
            return
        if declared is not None or scope["method"] in _SAFE_METHODS:
            # The parser stops a body at its Content-Length: nothing more to count.
            await self.app(scope, receive, send)
            return
        await _Capped(limit, receive, send).run(self.app, scope)  # chunked: counted

    def check(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
        """The refusal for this request's headers and peer, or None (and the env marker set)."""
        s = self.settings
        peer: PeerCreds | None = scope.get(PEER_KEY)
        if s.peer_rule is not None and peer is not None and not s.peer_rule.allows(peer):
            return 403, (f"peer uid {peer.uid} gid {peer.gid} may not use this socket "
                         f"(allowed: {s.peer_rule.describe()})")
        if s.token is not None:
            given = headers.get(b"authorization", b"")
            if not (given[:7].lower() == _BEARER
                    and hmac.compare_digest(given[7:].strip(), s.token)):
                return 401, "missing or wrong bearer token"
        if s.check_host:
            host = headers.get(b"host")
            if host is None or host_name(host.decode("latin-1")) not in s.allowed_hosts:
                return 403, f"Host {_text(host)!r} is not a name of this listener"
        if s.check_origin:
            origin = headers.get(b"origin")
            if origin is not None and origin_host(origin.decode("latin-1")) not in s.allowed_hosts:
                return 403, f"Origin {_text(origin)!r} is not allowed"
        if s.json_only and scope["method"] not in _SAFE_METHODS:
            content_type = headers.get(b"content-type")
            if content_type != _JSON and (
                    content_type is None
                    or content_type.split(b";", 1)[0].strip().lower() != _JSON):
                return 415, (f"expected content-type application/json, got "
                             f"{_text(content_type)!r}")
        if peer is not None:
            reader = peer.uid in s.env_reader_uids
        else:
            reader = s.env_over_tcp and (s.token is not None or scope.get("scheme") == "https")
        scope[ENV_READER_KEY] = reader
        return None


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")[:200]


class _Capped:
    """One request whose body is counted as the app reads it: past `limit`, a 413 goes out
    (if the app has not answered yet), the app sees its body end there and whatever it answers
    is dropped. The rest of the body is discarded by the parser, bounded by the body timeout
    (bounded_protocol); the connection stays open so that the client can read the 413 while
    it is still sending."""

    def __init__(self, limit: int, receive: Receive, send: Send) -> None:
        self.limit = limit
        self.size = 0
        self.receive = receive
        self.send = send
        self.started = False
        self.cut = False

    async def run(self, app: ASGIApp, scope: Scope) -> None:
        await app(scope, self._receive, self._send)

    async def _receive(self) -> Message:
        if self.cut:
            return {"type": "http.request", "body": b"", "more_body": False}
        message = await self.receive()
        if message["type"] == "http.request":
            self.size += len(message.get("body", b""))
            if self.size > self.limit:
                self.cut = True
                if not self.started:
                    self.started = True
                    await _refuse(self.send, 413, f"body larger than {self.limit} bytes",
                                  close=False)
                return {"type": "http.request", "body": b"", "more_body": False}
        return message

    async def _send(self, message: Message) -> None:
        if self.cut:
            return
        if message["type"] == "http.response.start":
            self.started = True
        await self.send(message)
