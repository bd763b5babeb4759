"""The policy server's uvicorn protocol: a response's writes leave in one ``write``."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

from policy_server.http_edge.asgi import create_app
from policy_server.http_edge.http_protocol import CoalescingHttpToolsProtocol, _HeldWrites
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.factory import container, envelope, pod
from tests.policy_server.servers import serve_on_uds


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> Any:
        return f"info:{name}"


async def test_writes_of_one_loop_step_go_out_as_one() -> None:
    real = _Transport()
    held = _HeldWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    held.write(b"HTTP/1.1 200 OK\r\n\r\n")
    held.write(b"{}")
    assert real.writes == []
    await asyncio.sleep(0)
    assert real.writes == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
    held.write(b"next")
    await asyncio.sleep(0)
    assert real.writes[1:] == [b"next"]  # a later step: its own write
    assert held.get_extra_info("peername") == "info:peername"  # everything else delegated


async def test_close_sends_what_is_held_first() -> None:
    real = _Transport()
    held = _HeldWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    held.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    held.close()
    assert real.writes == [b"HTTP/1.1 400 Bad Request\r\n\r\n"] and real.closed
    await asyncio.sleep(0)  # the scheduled flush finds nothing left
    assert len(real.writes) == 1


def _exchange(path: Path, requests: list[bytes]) -> list[bytes]:
    """Each request on one kept-alive connection; the first recv() after each."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        firsts = []
        for request in requests:
            sock.sendall(request)
            firsts.append(sock.recv(1 << 16))
        return firsts


async def test_real_uvicorn_answers_in_one_piece(tmp_path: Path) -> None:
    body = envelope("CreateContainer", pod=pod(), container=container(cpu={"shares": 2}))
    raw = json.dumps(body).encode()
    post = (b"POST /v1/policies/koordinator-qos HTTP/1.1\r\nhost: p\r\n"
            b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(raw) + raw)
    server = PolicyServer(ServerOptions())
    async with serve_on_uds(create_app(server), tmp_path / "p.sock",
                            http=CoalescingHttpToolsProtocol) as path:
        firsts = await asyncio.to_thread(_exchange, path, [post, post, b"GARBAGE\r\n\r\n"])
    for first in firsts[:2]:
        head, _, reply = first.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        assert len(reply) == length  # headers and body arrived together, and complete
    assert firsts[2].startswith(b"HTTP/1.1 400")  # uvicorn's own answer, sent before the close
