"""Client for the bridge's control API: ``GET /v1/state``, ``POST /v1/updates``, ``GET /readyz``.

Owns the only HTTP client code in the server; httpx errors are mapped to
``BridgeControlError`` here and nowhere else (``BridgeUnreachableError`` when nothing accepts
the connection, so a caller can tell "not started yet" from a broken reply). The control URL
is ``unix:///path.sock`` (HTTP over a Unix socket) or ``http://host:port``. Every call has a
timeout.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import httpx

from policy_server.exceptions import BridgeControlError, BridgeUnreachableError

log = logging.getLogger(__name__)

BRIDGE_TIMEOUT_S = 5.0
# The bridge waits up to 35 s for the runtime to take an update.
PUSH_TIMEOUT_S = 40.0


@dataclass(frozen=True, slots=True)
class BridgeState:
    """The runtime's pods and containers as the bridge knows them (webhook JSON shape)."""

    pods: list[dict[str, Any]]
    containers: list[dict[str, Any]]


def _client(
    url: str, timeout_s: float, transport: httpx.AsyncBaseTransport | None
) -> httpx.AsyncClient:
    if url.startswith("unix://"):
        path = url.removeprefix("unix://")
        if not path.startswith("/"):
            raise BridgeControlError(f"bridge control URL {url!r}: expected unix:///absolute/path")
        uds = transport or httpx.AsyncHTTPTransport(uds=path)
        return httpx.AsyncClient(transport=uds, base_url="http://bridge", timeout=timeout_s)
    if url.startswith(("http://", "https://")):
        return httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout_s, transport=transport)
    raise BridgeControlError(
        f"bridge control URL {url!r}: expected unix:///path.sock or http://host:port"
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
    ) -> None:
        self.url = url
        self._client = _client(url, timeout_s, transport)

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
        response = await self._request(method, path, body, timeout_s)
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
        data = await self._call("GET", "/v1/state")
        return BridgeState(_list_of_objects(data, "pods"), _list_of_objects(data, "containers"))

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
            log.warning("the bridge dropped update fields the runtime cannot apply: %s",
                        json.dumps(dropped)[:500])
        return failed
