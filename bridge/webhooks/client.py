"""The HTTP edge of one webhook: POST a JSON body, get a JSON value back.

Per webhook a small pool of kept-alive HTTP/1.1 connections (`http1.Http1Connection`: asyncio
transports, replies parsed by httptools) to a Unix socket, or over TCP with TLS and a bearer
token. Why not a client library: per 4 KB POST to a Unix socket, aiohttp's client spends
about three times the CPU of this pool with httptools, httpx's default transport far more
(benchmarks/bench_http_client.py, docs/performance.md#numbers-behind-the-code);
the webhook path pays it once per NRI event while the runtime waits.

What the bridge sends is guarded by whom it reaches (docs/security.md#files): on a Unix socket
the server's uid (SO_PEERCRED) must be root, ours or one of the webhook's `peer_uids` before a
byte is written, so a socket another user put at the policy's path gets no request; the token
and the TLS files are read through bridge.file_trust (every entry on the way owned by
root or us and writable by nobody else, the file opened O_NOFOLLOW and checked on the
descriptor read), so a token file swapped for a symlink to a root-only file is not sent.

Every connection and OS error is mapped here, once, into `WebhookFailure` with a kind and a
one-line reason (the reply's own faults are mapped in http1); nothing above this module sees
a socket error.

The whole exchange (waiting for a connection slot, connect, send, receive) runs under one
asyncio timeout equal to the call's budget, and the body is read with a size cap so a hostile
policy cannot make us buffer without bound.

One retry, by one rule (Go net/http's transport applies the same one to requests it may
replay): a request written on a REUSED kept-alive connection that the server closed before
any byte of a reply arrived is sent once more, on a new connection, inside the same budget.
That is the keep-alive race: the server's idle timeout fired as our request was on its way,
so the server closed a connection it had read nothing from. Never on a fresh connection (a
server that hangs up on a new connection means it), never once a reply had started (even a
1xx), never twice (docs/webhooks.md, "When a policy may see a request twice").
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import ssl
import time
from typing import Any
from urllib.parse import quote, urlsplit

from bridge import file_trust
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.http1 import Http1Connection, Unanswered
from bridge.webhooks.specs import TlsSpec, WebhookSpec

log = logging.getLogger(__name__)

MAX_REPLY_BYTES = 1 << 20
TOKEN_REFRESH_S = 60.0  # re-read bearer_token_file (projected tokens rotate)
MAX_CONNECTIONS = 64
# A kept-alive connection idle this long is closed instead of reused: servers close idle
# connections after a few seconds (uvicorn: 5 s), and a request written just as the close
# arrives would be lost. A new connection on a Unix socket is cheap
# (docs/performance.md#numbers-behind-the-code).
MAX_IDLE_S = 4.0
_FIXED_HEADERS = (b"Content-Type: application/json\r\nAccept: application/json\r\n"
                  b"User-Agent: nri-webhook-bridge\r\n")


def _trusted_bytes(path: str, what: str) -> bytes:
    try:
        return file_trust.read_trusted(path)
    except file_trust.UntrustedPath as exc:
        raise WebhookFailure(FailureKind.CONNECT, f"{what} not used: {exc}") from None


def _ca_data(raw: bytes) -> str | bytes:
    """PEM text as `cadata` takes it (a str), DER as bytes."""
    return raw.decode("ascii") if raw.lstrip().startswith(b"-----") else raw


def _load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """load_cert_chain takes paths only: the checked bytes go through anonymous memory files
    (memfd), so OpenSSL never opens the configured paths itself."""
    fds = []
    try:
        for name, data in (("cert", cert), ("key", key)):
            fd = os.memfd_create(f"nri-webhook-bridge-{name}", os.MFD_CLOEXEC)
            fds.append(fd)
            os.write(fd, data)
        ctx.load_cert_chain(f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}")
    finally:
        for fd in fds:
            os.close(fd)


def _ssl_context(tls: TlsSpec | None) -> ssl.SSLContext:
    if tls is not None and tls.ca_file:
        ctx = ssl.create_default_context(
            cadata=_ca_data(_trusted_bytes(tls.ca_file, "tls.ca_file")))
    else:
        ctx = ssl.create_default_context()
    if tls is not None:
        if tls.cert_file and tls.key_file:
            _load_cert_chain(ctx, _trusted_bytes(tls.cert_file, "tls.cert_file"),
                             _trusted_bytes(tls.key_file, "tls.key_file"))
        if tls.insecure_skip_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    return ctx


class _Token:
    """A bearer token read from a file, re-read now and then; `line()` is its header line."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._line: bytes | None = None  # None: what the file holds cannot go in a header
        self._read_at = -TOKEN_REFRESH_S

    def line(self) -> bytes:
        now = time.monotonic()
        if now - self._read_at >= TOKEN_REFRESH_S:
            try:
                value = file_trust.read_trusted(self.path).decode("utf-8").strip()
            except file_trust.UntrustedPath as exc:
                raise WebhookFailure(FailureKind.CONNECT,
                                     f"bearer_token_file not sent: {exc}") from None
            except UnicodeDecodeError:
                value = "\x00"  # not UTF-8: not sendable either
            self._read_at = now
            # Checked and encoded once per read, not per event.
            sendable = value.isascii() and not any(c < " " or c == "\x7f" for c in value)
            self._line = f"Authorization: Bearer {value}\r\n".encode() if sendable else None
        if self._line is None:
            raise WebhookFailure(FailureKind.CONNECT, "bearer_token_file holds characters a "
                                 "header cannot carry (control or non-ASCII)")
        return self._line


def _request_target(path: str) -> str:
    """The configured path as sent: bytes a request line cannot carry are %-escaped."""
    return quote(path, safe="".join(chr(c) for c in range(0x21, 0x7F)))


class PolicyClient:
    """POSTs envelopes to one webhook; `post` returns the decoded JSON reply."""

    def __init__(self, spec: WebhookSpec) -> None:
        self.endpoint = spec.endpoint
        self._tls = spec.tls
        self._peer_owners = spec.peer_owners
        self._token = _Token(spec.bearer_token_file) if spec.bearer_token_file else None
        url = urlsplit(spec.endpoint.base_url)
        self._host, self._port = url.hostname or "localhost", url.port
        self._https = url.scheme == "https"
        self._ssl: ssl.SSLContext | None = None  # built on first connect (~ms to load CAs)
        self._head = (f"POST {_request_target(spec.endpoint.path)} HTTP/1.1\r\n"
                      f"Host: {url.netloc}\r\n").encode() + _FIXED_HEADERS
        self._idle: list[Http1Connection] = []
        self._all: set[Http1Connection] = set()
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self.retries = 0  # requests re-sent after the keep-alive race (a metric reads it)

    async def aclose(self) -> None:
        for conn in self._all:
            conn.close()
        self._all.clear()
        self._idle.clear()

    async def post(self, body: bytes, budget_s: float) -> Any:
        """Send `body`; the decoded reply, or WebhookFailure. Never takes longer than budget_s."""
        return decode_reply(await self.post_raw(body, budget_s))

    async def post_raw(self, body: bytes, budget_s: float) -> bytes:
        """Send `body`; the reply's bytes (2xx, checked for size and encoding), or
        WebhookFailure. Never takes longer than budget_s."""
        head = self._head
        if self._token is not None:
            head += self._token.line()
        request = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)
        try:
            async with asyncio.timeout(budget_s):
                return await self._exchange(request)
        except TimeoutError:
            raise WebhookFailure(FailureKind.TIMEOUT,
                                 f"no reply within {budget_s * 1000:.0f} ms") from None

    async def _exchange(self, request: bytes) -> bytes:
        async with self._slots:
            conn = self._reuse()
            if conn is not None:
                try:
                    return await self._send(conn, request)
                except Unanswered:
                    # Closed by the server before any byte of a reply: the keep-alive race.
                    self.retries += 1
                    log.debug("webhook request re-sent on a new connection: the policy closed "
                              "a kept-alive connection before replying",
                              extra={"endpoint": self.endpoint.url})
            try:
                return await self._send(await self._connect(), request)
            except Unanswered:
                raise WebhookFailure(FailureKind.TRANSPORT,
                                     "the policy closed the connection without a reply") from None

    async def _send(self, conn: Http1Connection, request: bytes) -> bytes:
        """One exchange on `conn`, which goes back to the idle pool if it can carry another."""
        try:
            return await conn.exchange(request)
        finally:
            if conn.reusable:
                conn.idle_since = time.monotonic()
                self._idle.append(conn)
            else:
                conn.close()
                self._all.discard(conn)

    def _reuse(self) -> Http1Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable and now - conn.idle_since < MAX_IDLE_S:
                return conn
            conn.close()
            self._all.discard(conn)
        return None

    async def _connect(self) -> Http1Connection:
        loop = asyncio.get_running_loop()
        try:
            if self.endpoint.socket_path is not None:
                _, conn = await loop.create_unix_connection(
                    lambda: Http1Connection(MAX_REPLY_BYTES),
                    sock=await self._unix_socket(self.endpoint.socket_path))
            else:
                if self._https and self._ssl is None:
                    self._ssl = _ssl_context(self._tls)
                _, conn = await loop.create_connection(
                    lambda: Http1Connection(MAX_REPLY_BYTES), self._host,
                    self._port or (443 if self._https else 80),
                    ssl=self._ssl if self._https else None,
                    server_hostname=self._host if self._https else None)
        except (OSError, ssl.SSLError, ssl.CertificateError) as exc:
            raise WebhookFailure(FailureKind.CONNECT,
                                 f"cannot connect to {self.endpoint.url}: {_short(exc)}") from None
        self._all.add(conn)
        return conn

    async def _unix_socket(self, path: str) -> socket.socket:
        """A socket connected to `path` whose server runs as a uid we trust; else
        WebhookFailure(CONNECT), nothing having been written to it."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, path)
            uid = file_trust.peer_uid(sock)
        except BaseException:
            sock.close()
            raise
        if uid not in self._peer_owners:
            sock.close()
            allowed = ", ".join(file_trust.user_name(u) for u in sorted(self._peer_owners))
            raise WebhookFailure(FailureKind.CONNECT,
                                 f"{path} is served by {file_trust.user_name(uid)}, not by "
                                 f"{allowed} (peer_uids); no request sent")
        return sock


def decode_reply(raw: bytes) -> Any:
    """A reply body's JSON value ({} for an empty body), or WebhookFailure(INVALID_JSON)."""
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise WebhookFailure(FailureKind.INVALID_JSON, f"reply is not JSON: {exc}") from None
    except RecursionError:  # e.g. 100,000 nested lists: the decoder's depth guard
        raise WebhookFailure(FailureKind.INVALID_JSON,
                             "reply is not JSON: nested too deeply") from None


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
