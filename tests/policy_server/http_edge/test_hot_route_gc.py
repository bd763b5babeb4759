"""The hot route holds the cyclic collector off while it answers a body the size of the node
(a Synchronize), and only then (bridge.process_setup.gc_pause; docs/performance.md)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import MutableMapping
from typing import Any

import pytest

from policy_server.http_edge import hot_route
from policy_server.http_edge.hot_route import BULK_BODY_BYTES, HotRoute


def post(route: HotRoute, body: bytes) -> list[MutableMapping[str, Any]]:
    sent: list[MutableMapping[str, Any]] = []
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/policies/p",
        "headers": [(b"content-type", b"application/json")],
    }
    chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)] or [b""]

    async def receive() -> dict[str, Any]:
        chunk = chunks.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message: MutableMapping[str, Any]) -> None:
        message["gc_enabled"] = gc.isenabled()
        sent.append(message)

    asyncio.run(route(scope, receive, send))
    return sent


@pytest.mark.parametrize(
    ("size", "paused"), [(1000, False), (BULK_BODY_BYTES - 1, False), (BULK_BODY_BYTES, True)]
)
def test_the_collector_waits_only_for_a_node_sized_body(
    monkeypatch: pytest.MonkeyPatch, size: int, paused: bool
) -> None:
    seen: list[bool] = []

    async def evaluate(server: Any, name: str, raw: bytes) -> tuple[int, bytes]:
        assert len(raw) == size
        seen.append(gc.isenabled())
        return 200, b"{}"

    monkeypatch.setattr(hot_route, "evaluate_body", evaluate)
    assert gc.isenabled()
    sent = post(HotRoute(app=None, server=None), b" " * size)  # type: ignore[arg-type]
    assert seen == [not paused]
    # ... until the answer has left, and on again after it.
    assert [m["gc_enabled"] for m in sent] == [not paused, not paused]
    assert sent[0]["status"] == 200 and sent[1]["body"] == b"{}"
    assert gc.isenabled()
