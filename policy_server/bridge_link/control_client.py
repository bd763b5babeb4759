"""Client for the bridge's control API: ``GET /v1/state``, ``POST /v1/updates``, ``GET /readyz``.

Owns the only HTTP client code in the server; httpx errors are mapped to
``BridgeControlError`` here and nowhere else (``BridgeUnreachableError`` when nothing accepts
the connection, so a caller can tell "not started yet" from a broken reply). Every call has a
timeout.

Whom it trusts (``BridgeTrust``): the reconciler running as root re-applies what ``GET
/v1/state`` says, so the peer must be the bridge. ``unix:///path.sock``: each new connection's
server is checked with ``SO_PEERCRED`` (root, this process's uid, or the uids given), and a
socket served by anyone else is refused with ``BridgePeerError`` naming its uid.
``https://host:port``: the bridge's certificate checked against the CA given (optionally a
client certificate and a bearer token file). Plain ``http://`` is refused when the client is
made unless ``insecure`` (``--bridge-control-insecure``, logged as a warning).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpcore
import httpx

from bridge import file_trust
from policy_server.exceptions import BridgeControlError, BridgeUnreachableError

log = logging.getLogger(__name__)

BRIDGE_TIMEOUT_S = 5.0
# The bridge waits up to 35 s for the runtime to take an update.
PUSH_TIMEOUT_S = 40.0


@dataclass(frozen=True, slots=True)
class BridgeState:
    """The runtime's pods and containers as the bridge knows them (webhook JSON shape), and the
    bytes the bridge sent them as (``raw``: ``{"pods": ..., "containers": ...}``, b"" when not
    fetched), which the server's own Synchronize is decoded from, not encoded again."""

    pods: list[dict[str, Any]]
    containers: list[dict[str, Any]]
    raw: bytes = b""


class BridgePeerError(BridgeControlError):
    """The control socket is served by a process this server does not trust."""


@dataclass(frozen=True, slots=True)
class BridgeTrust:
    """Who may answer as the bridge: see the module docstring. ``uids``: besides root and this
    process's own uid, for a Unix socket. ``ca``/``cert``/``key``/``token_file``: for https
    (the token is sent as ``Authorization: Bearer`` on any scheme)."""

    uids: frozenset[int] = field(default_factory=frozenset)
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    token_file: Path | None = None
    insecure: bool = False

    def allowed_uids(self) -> frozenset[int]:
        return frozenset({0, os.geteuid(), *self.uids})


class _PeerCheckingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with each Unix connection's server checked first."""

    def __init__(self, allowed: frozenset[int]) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._allowed = allowed

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise BridgeControlError("a Unix socket transport was asked for a TCP connection")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(path, timeout, socket_options)
        sock = stream.get_extra_info("socket")
        try:
            if not isinstance(sock, socket.socket):
                raise BridgePeerError(f"bridge control socket {path}: cannot check its peer")
            pid, uid, _gid = file_trust.peer_ucred(sock)
            if uid not in self._allowed:
                raise BridgePeerError(
                    f"bridge control socket {path} is served by uid {uid} (pid {pid}), not by "
                    f"an allowed uid ({', '.join(map(str, sorted(self._allowed)))}; "
                    "--bridge-control-uid): refusing its state and not sending it updates"
                )
        except BaseException:
            await stream.aclose()
            raise
        return stream

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _peer_checked_uds(path: str, allowed: frozenset[int]) -> httpx.AsyncHTTPTransport:
    transport = httpx.AsyncHTTPTransport(uds=path)
    # httpx builds its httpcore pool without a way to pass a network backend; the pool is
    # replaced by one that has it (same options: HTTP/1.1, no retries).
    transport._pool = httpcore.AsyncConnectionPool(
        uds=path, network_backend=_PeerCheckingBackend(allowed)
    )
    return transport


def _read_token(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise BridgeControlError(f"--bridge-control-token-file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        token = f.read(65536).decode(errors="replace").strip()
    if not token:
        raise BridgeControlError(f"--bridge-control-token-file {path}: empty")
    return token


def _tls_context(url: str, trust: BridgeTrust) -> ssl.SSLContext:
    if trust.ca is None:
        raise BridgeControlError(
            f"bridge control URL {url!r}: https needs the bridge's CA (--bridge-control-ca)"
        )
    try:
        context = ssl.create_default_context(cafile=str(trust.ca))
        if trust.cert is not None:
            context.load_cert_chain(str(trust.cert), str(trust.key) if trust.key else None)
    except (OSError, ssl.SSLError) as exc:
        raise BridgeControlError(f"bridge control TLS files: {exc}") from None
    return context


def _client(
    url: str,
    timeout_s: float,
    transport: httpx.AsyncBaseTransport | None,
    trust: BridgeTrust,
) -> httpx.AsyncClient:
    headers = {}
    if trust.token_file is not None:
        headers["authorization"] = f"Bearer {_read_token(trust.token_file)}"
    if url.startswith("unix://"):
        path = url.removeprefix("unix://")
        if not path.startswith("/"):
            raise BridgeControlError(f"bridge control URL {url!r}: expected unix:///absolute/path")
        uds = transport or _peer_checked_uds(path, trust.allowed_uids())
        return httpx.AsyncClient(
            transport=uds, base_url="http://bridge", timeout=timeout_s, headers=headers
        )
    if url.startswith("https://"):
        return httpx.AsyncClient(
            base_url=url.rstrip("/"),
            timeout=timeout_s,
            transport=transport,
            verify=_tls_context(url, trust),
            headers=headers,
        )
    if url.startswith("http://"):
        # A transport given by the caller (an in-process test's mock) is the caller's choice of
        # peer; the refusal is for the connections this client makes itself.
        if not trust.insecure and transport is None:
            raise BridgeControlError(
                f"bridge control URL {url!r}: plain http is refused (any local user can serve "
                "a forged state on a TCP port, and the reconciler would apply it as root); use "
                "unix:///path.sock or https:// with --bridge-control-ca, or accept the risk "
                "with --bridge-control-insecure"
            )
        if transport is None:
            log.warning(
                "INSECURE: --bridge-control-insecure: the reconciler trusts whatever answers on %s "
                "over plain http (no peer check, no TLS); any local user who binds that address "
                "can make it write forged values",
                url,
            )
        return httpx.AsyncClient(
            base_url=url.rstrip("/"), timeout=timeout_s, transport=transport, headers=headers
        )
    raise BridgeControlError(
        f"bridge control URL {url!r}: expected unix:///path.sock or https://host:port"
    )


def _list_of_objects(body: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = body.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise BridgeControlError(f"bridge state: {key!r} is not a list of objects")
    return value


class BridgeControl:
    """One bridge's control API."""

    def __init__(
        self,
        url: str,
        timeout_s: float = BRIDGE_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
        trust: BridgeTrust | None = None,
    ) -> None:
        self.url = url
        self._client = _client(url, timeout_s, transport, trust or BridgeTrust())

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _request(
        self, method: str, path: str, body: object | None = None, timeout_s: float | None = None
    ) -> httpx.Response:
        try:
            if timeout_s is None:
                return await self._client.request(method, path, json=body)
            return await self._client.request(method, path, json=body, timeout=timeout_s)
        except httpx.ConnectError as exc:  # no socket file, or nobody listening on it
            raise BridgeUnreachableError(f"{method} {self.url}{path}: {exc!r}") from None
        except httpx.HTTPError as exc:
            raise BridgeControlError(f"{method} {self.url}{path}: {exc!r}") from None

    async def _call(
        self, method: str, path: str, body: object | None = None, timeout_s: float | None = None
    ) -> dict[str, Any]:
        return self._object(method, path, await self._request(method, path, body, timeout_s))

    def _object(self, method: str, path: str, response: httpx.Response) -> dict[str, Any]:
        if response.status_code != 200:
            raise BridgeControlError(
                f"{method} {self.url}{path}: HTTP {response.status_code}: {response.text[:200]}"
            )
        try:
            data = response.json()
        except ValueError:
            raise BridgeControlError(f"{method} {self.url}{path}: reply is not JSON") from None
        if not isinstance(data, dict):
            raise BridgeControlError(f"{method} {self.url}{path}: reply is not a JSON object")
        return data

    async def ready(self) -> bool:
        """Whether the bridge is registered with the runtime and has answered its Synchronize
        (``GET /readyz``: 200, or 503 until then). Before that its state is empty, or the
        Synchronize it is still answering."""
        response = await self._request("GET", "/readyz")
        if response.status_code in (200, 503):
            return response.status_code == 200
        raise BridgeControlError(
            f"GET {self.url}/readyz: HTTP {response.status_code}: {response.text[:200]}"
        )

    async def state(self) -> BridgeState:
        response = await self._request("GET", "/v1/state", None, None)
        data = self._object("GET", "/v1/state", response)
        return BridgeState(_list_of_objects(data, "pods"), _list_of_objects(data, "containers"),
                           response.content)

    async def push_updates(self, updates: list[dict[str, Any]]) -> list[Any]:
        """Send container updates; returns what the bridge reports as failed."""
        data = await self._call("POST", "/v1/updates", {"update": updates}, PUSH_TIMEOUT_S)
        failed = data.get("failed") or []
        if not isinstance(failed, list):
            raise BridgeControlError("bridge updates reply: 'failed' is not a list")
        dropped = data.get("dropped") or []
        if dropped:
            # Fields the route to the runtime cannot carry (CRI UpdateContainerResources has no
            # pids, memory reservation, ...): applied nowhere, so say so once per push.
            log.warning(
                "the bridge dropped update fields the runtime cannot apply: %s",
                json.dumps(dropped)[:500],
            )
        return failed
