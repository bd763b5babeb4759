"""The HTTP side of one webhook: POST a JSON body, get a JSON value back.

One `httpx.AsyncClient` per webhook, kept alive across events (a Unix socket
through `AsyncHTTPTransport(uds=...)`, or TCP with TLS and a bearer token).
Every httpx exception is translated here, once, into `WebhookFailure` with a
kind and a one-line reason; nothing above this module sees httpx.

The whole exchange (connect, send, receive, read body) runs under one
asyncio timeout equal to the call's budget, and the body is read with a size
cap so a hostile policy cannot make us buffer without bound.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import ssl
import sys
import time
from pathlib import Path
from typing import Any

import httpx

# httpcore tries `import sniffio` up to four times per request; without sniffio
# installed (anyio >= 4.12 no longer pulls it in) every attempt scans sys.path,
# which cost ~0.2 ms per webhook call. A None entry makes the import fail at once.
if importlib.util.find_spec("sniffio") is None:
    sys.modules.setdefault("sniffio", None)  # type: ignore[arg-type]

from bridge.webhooks.config import Endpoint, TlsSpec, WebhookSpec
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.transport import AiohttpTransport

MAX_REPLY_BYTES = 1 << 20
TOKEN_REFRESH_S = 60.0  # re-read bearer_token_file (projected tokens rotate)
_HEADERS = {"content-type": "application/json", "accept": "application/json",
            "user-agent": "nri-webhook-bridge"}


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


def _transport(endpoint: Endpoint, tls: TlsSpec | None) -> httpx.AsyncBaseTransport:
    if endpoint.socket_path is not None:
        # No TLS over a Unix socket; skipping the default context saves ~50 ms per client.
        return AiohttpTransport(uds=endpoint.socket_path)
    context = _ssl_context(tls) if endpoint.base_url.startswith("https:") else None
    return AiohttpTransport(ssl_context=context)


class PolicyClient:
    """POSTs envelopes to one webhook; `post` returns the decoded JSON reply."""

    def __init__(self, spec: WebhookSpec,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.endpoint = spec.endpoint
        self._token = _Token(spec.bearer_token_file) if spec.bearer_token_file else None
        longest = max(spec.timeout_s, spec.sync_timeout_s)
        self._client = httpx.AsyncClient(
            transport=transport or _transport(spec.endpoint, spec.tls),
            base_url=spec.endpoint.base_url,
            # Backstop only: the budget below is the real bound.
            timeout=httpx.Timeout(longest + 1.0),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            headers=_HEADERS,
        )
        self._url = httpx.URL(spec.endpoint.base_url + spec.endpoint.path)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def post(self, body: bytes, budget_s: float) -> Any:
        """Send `body`; the decoded reply, or WebhookFailure. Never takes longer than budget_s."""
        headers = {"authorization": self._token.header()} if self._token else None
        try:
            async with asyncio.timeout(budget_s):
                raw = await self._exchange(body, headers)
        except TimeoutError:
            raise WebhookFailure(FailureKind.TIMEOUT,
                                 f"no reply within {budget_s * 1000:.0f} ms") from None
        except httpx.TimeoutException:
            raise WebhookFailure(FailureKind.TIMEOUT, "HTTP client timeout") from None
        except (httpx.ConnectError, ssl.SSLError) as exc:
            raise WebhookFailure(FailureKind.CONNECT,
                                 f"cannot connect to {self.endpoint.url}: {_short(exc)}") from None
        except httpx.HTTPError as exc:
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
        # One fixed POST per event: skip AsyncClient.send's per-request machinery
        # (URL merging, auth and redirect plumbing, cookie extraction: ~25% of the
        # bridge's CPU per webhook event) and hand a prebuilt request to the
        # transport the client picks for the URL. `_transport_for_url` is also the
        # seam respx's "httpx" mocker patches, so contract tests still intercept.
        request = httpx.Request("POST", self._url, content=body,
                                headers={**_HEADERS, **headers} if headers else _HEADERS)
        transport = self._client._transport_for_url(self._url)
        response = await transport.handle_async_request(request)
        try:
            # We never ask for a content-encoding. Decoding one anyway would inflate each
            # chunk whole before the size cap sees it: a gzip bomb's 1 MiB becomes 1 GiB.
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            if not 200 <= response.status_code < 300:
                head = b"" if encoding != "identity" else await _read_capped(
                    response, 512, truncate=True)
                raise WebhookFailure(FailureKind.HTTP_STATUS, f"HTTP {response.status_code}: "
                                     f"{head.decode(errors='replace').strip()[:200]}")
            if encoding != "identity":
                raise WebhookFailure(FailureKind.INVALID_JSON, f"reply has content-encoding "
                                     f"{encoding[:40]!r}; only identity is accepted")
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
                raise WebhookFailure(FailureKind.TOO_LARGE,
                                     f"reply of {declared} bytes exceeds {MAX_REPLY_BYTES}")
            return await _read_capped(response, MAX_REPLY_BYTES, truncate=False)
        finally:
            await response.aclose()


async def _read_capped(response: httpx.Response, cap: int, truncate: bool) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
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
