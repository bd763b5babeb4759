"""The HTTP edge of one webhook: POST a JSON body, get a JSON value back.

One HTTP stack: aiohttp. Per webhook one `ClientSession` with its own
connector (a Unix socket, or TCP with TLS and a bearer token), kept alive
across events. Why aiohttp and not httpx: on the 2-core reference machine a
4 KB POST to the same uvicorn app over a Unix socket took p50 835 µs with
httpx's default transport (httpcore, h11 in pure Python on anyio) and 223 µs
with aiohttp (llhttp, a C parser, on plain asyncio); the webhook path pays that
once per event (docs/performance.md).

Every aiohttp and OS exception is mapped here, once, into `WebhookFailure`
with a kind and a one-line reason; nothing above this module sees aiohttp.

The whole exchange (connect, send, receive, read body) runs under one asyncio
timeout equal to the call's budget, and the body is read with a size cap so a
hostile policy cannot make us buffer without bound.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from pathlib import Path
from typing import Any

import aiohttp
from yarl import URL

from bridge.webhooks.config import Endpoint, TlsSpec, WebhookSpec
from bridge.webhooks.failures import FailureKind, WebhookFailure

MAX_REPLY_BYTES = 1 << 20
TOKEN_REFRESH_S = 60.0  # re-read bearer_token_file (projected tokens rotate)
MAX_CONNECTIONS = 64
_HEADERS = {"Content-Type": "application/json", "Accept": "application/json",
            "User-Agent": "nri-webhook-bridge"}


def _ssl_context(tls: TlsSpec | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=tls.ca_file if tls else None)
    if tls is not None:
        if tls.cert_file and tls.key_file:
            ctx.load_cert_chain(tls.cert_file, tls.key_file)
        if tls.insecure_skip_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    return ctx


class _Token:
    """A bearer token read from a file, re-read now and then."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._value = ""
        self._read_at = -TOKEN_REFRESH_S

    def header(self) -> str:
        now = time.monotonic()
        if now - self._read_at >= TOKEN_REFRESH_S:
            try:
                self._value = Path(self.path).read_text().strip()
            except OSError as exc:
                raise WebhookFailure(FailureKind.CONNECT,
                                     f"cannot read bearer_token_file: {exc.strerror}") from None
            self._read_at = now
        return f"Bearer {self._value}"


def _connector(endpoint: Endpoint, tls: TlsSpec | None) -> aiohttp.BaseConnector:
    if endpoint.socket_path is not None:
        # No TLS over a Unix socket; skipping the default context saves ~50 ms per client.
        return aiohttp.UnixConnector(path=endpoint.socket_path, limit=MAX_CONNECTIONS)
    if endpoint.base_url.startswith("https:"):
        return aiohttp.TCPConnector(limit=MAX_CONNECTIONS, ssl=_ssl_context(tls))
    return aiohttp.TCPConnector(limit=MAX_CONNECTIONS, ssl=False)


class PolicyClient:
    """POSTs envelopes to one webhook; `post` returns the decoded JSON reply."""

    def __init__(self, spec: WebhookSpec) -> None:
        self.endpoint = spec.endpoint
        self._tls = spec.tls
        self._token = _Token(spec.bearer_token_file) if spec.bearer_token_file else None
        # encoded=True: the configured path and query go out exactly as written.
        self._url = URL(spec.endpoint.base_url + spec.endpoint.path, encoded=True)
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        # Created on first use: aiohttp binds a session to the running event loop.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=_connector(self.endpoint, self._tls),
                # We never ask for a content-encoding; decoding one anyway would inflate
                # each chunk whole before the size cap sees it (a gzip bomb).
                auto_decompress=False,
                timeout=aiohttp.ClientTimeout(total=None),  # the caller's budget bounds calls
                skip_auto_headers=("Accept-Encoding",),
                cookie_jar=aiohttp.DummyCookieJar(),  # a policy has no session to keep
                headers=_HEADERS)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def post(self, body: bytes, budget_s: float) -> Any:
        """Send `body`; the decoded reply, or WebhookFailure. Never takes longer than budget_s."""
        headers = {"Authorization": self._token.header()} if self._token else None
        try:
            async with asyncio.timeout(budget_s):
                raw = await self._exchange(body, headers)
        except TimeoutError:
            raise WebhookFailure(FailureKind.TIMEOUT,
                                 f"no reply within {budget_s * 1000:.0f} ms") from None
        except (aiohttp.ClientConnectorError, ssl.SSLError) as exc:
            raise WebhookFailure(FailureKind.CONNECT,
                                 f"cannot connect to {self.endpoint.url}: {_short(exc)}") from None
        except aiohttp.ClientError as exc:
            raise WebhookFailure(FailureKind.TRANSPORT,
                                 f"{type(exc).__name__}: {_short(exc)}") from None
        except OSError as exc:
            raise WebhookFailure(FailureKind.CONNECT,
                                 f"cannot connect to {self.endpoint.url}: {_short(exc)}") from None
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise WebhookFailure(FailureKind.INVALID_JSON, f"reply is not JSON: {exc}") from None
        except RecursionError:  # e.g. 100,000 nested lists: the decoder's depth guard
            raise WebhookFailure(FailureKind.INVALID_JSON,
                                 "reply is not JSON: nested too deeply") from None

    async def _exchange(self, body: bytes, headers: dict[str, str] | None) -> bytes:
        session = self._open()
        async with session.post(self._url, data=body, headers=headers,
                                allow_redirects=False) as response:
            encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
            if not 200 <= response.status < 300:
                head = b"" if encoding != "identity" else await _read_capped(
                    response, 512, truncate=True)
                raise WebhookFailure(FailureKind.HTTP_STATUS, f"HTTP {response.status}: "
                                     f"{head.decode(errors='replace').strip()[:200]}")
            if encoding != "identity":
                raise WebhookFailure(FailureKind.INVALID_JSON, f"reply has content-encoding "
                                     f"{encoding[:40]!r}; only identity is accepted")
            declared = response.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
                raise WebhookFailure(FailureKind.TOO_LARGE,
                                     f"reply of {declared} bytes exceeds {MAX_REPLY_BYTES}")
            return await _read_capped(response, MAX_REPLY_BYTES, truncate=False)


async def _read_capped(response: aiohttp.ClientResponse, cap: int, truncate: bool) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > cap:
            if truncate:
                chunks.append(chunk[: cap - (size - len(chunk))])
                break
            raise WebhookFailure(FailureKind.TOO_LARGE, f"reply exceeds {cap} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
