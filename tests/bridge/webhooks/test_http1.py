"""The webhook client's own HTTP/1.1 handling, against a real Unix-socket server that answers
with scripted bytes: connection reuse and when not to reuse, framings (Content-Length, chunked,
end at close), interim replies, replies nobody asked for, and what is written on the wire."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bridge.metrics import BridgeMetrics
from bridge.webhooks import client as client_module
from bridge.webhooks.client import PolicyClient
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.specs import parse_webhooks
from tests.waiting import until

BODY = b'{"warnings":["ok"]}'


def ok(body: bytes = BODY, *headers: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in headers)
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n%scontent-length: %d\r\n\r\n%s"
            % (head.encode(), len(body), body))


# What the server does with one request: the bytes to answer (None: close without answering).
Script = Callable[[bytes], bytes | None]


@dataclass
class Server:
    script: Script
    hang_up: bool = False  # close the connection after each answer, whatever it said
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    reads: list[int] = field(default_factory=list)  # bytes per read, to see one-write requests
    eofs: int = 0  # connections the client closed

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        buf = b""
        try:
            while True:
                head_end = buf.find(b"\r\n\r\n")
                while head_end < 0:
                    data = await reader.read(1 << 20)
                    if not data:
                        self.eofs += 1
                        return
                    self.reads.append(len(data))
                    buf += data
                    head_end = buf.find(b"\r\n\r\n")
                head = buf[:head_end].decode()
                length = int(next(line.split(":")[1] for line in head.split("\r\n")
                                  if line.lower().startswith("content-length")))
                while len(buf) < head_end + 4 + length:
                    buf += await reader.read(1 << 20)
                request, buf = buf[:head_end + 4 + length], buf[head_end + 4 + length:]
                self.requests.append(request)
                answer = self.script(request)
                if answer is None:
                    return
                writer.write(answer)
                await writer.drain()
                if self.hang_up or b"connection: close" in answer.lower():
                    return
        finally:
            writer.close()


@asynccontextmanager
async def serving(tmp: Path, script: Script, *, hang_up: bool = False,
                  url_path: str = "/v1/policy", token_file: Path | None = None,
                  ) -> AsyncIterator[tuple[Server, PolicyClient]]:
    server = Server(script, hang_up)
    sock = tmp / "p.sock"
    listener = await asyncio.start_unix_server(server.handle, path=str(sock))
    hook: dict[str, object] = {"name": "p", "url": f"unix://{sock}{url_path}",
                               "events": ["CreateContainer"]}
    if token_file is not None:
        hook["bearer_token_file"] = str(token_file)
    client = PolicyClient(parse_webhooks([hook])[0])
    try:
        yield server, client
    finally:
        await client.aclose()
        listener.close()


async def test_kept_alive_connection_carries_every_request(tmp_path: Path) -> None:
    async with serving(tmp_path, lambda _: ok()) as (server, client):
        for _ in range(5):
            assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
    assert server.connections == 1 and len(server.requests) == 5


async def test_request_is_one_write_with_the_expected_head(tmp_path: Path) -> None:
    body = b'{"event":"CreateContainer"}'
    async with serving(tmp_path, lambda _: ok(), url_path="/v1/a b") as (server, client):
        await client.post(body, 1.0)
    head, _, sent = server.requests[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/a%20b HTTP/1.1"  # nothing a request line cannot carry
    assert {"Host: localhost", "Content-Type: application/json",
            f"Content-Length: {len(body)}"} <= set(lines[1:])
    assert sent == body and server.reads == [len(server.requests[0])]


async def test_connection_close_reply_is_not_reused(tmp_path: Path) -> None:
    async with serving(tmp_path, lambda _: ok(BODY, "connection: close")) as (server, client):
        for _ in range(3):
            assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
    assert server.connections == 3


async def test_body_ended_by_the_close(tmp_path: Path) -> None:
    # HTTP/1.0 style: no Content-Length, no chunking; the body is everything until the close.
    reply = b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n" + BODY
    async with serving(tmp_path, lambda _: reply, hang_up=True) as (server, client):
        assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
        assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
    assert server.connections == 2


async def test_chunked_reply(tmp_path: Path) -> None:
    reply = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
             b"5\r\n{\"war\r\n" + b"%x\r\n" % (len(BODY) - 5) + BODY[5:] + b"\r\n0\r\n\r\n")
    async with serving(tmp_path, lambda _: reply) as (server, client):
        assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
        assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
    assert server.connections == 1


async def test_interim_replies_are_skipped(tmp_path: Path) -> None:
    interim = b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\ncontent-encoding: gzip\r\n\r\n"
    async with serving(tmp_path, lambda _: interim + ok()) as (_, client):
        assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}


async def test_a_second_unasked_reply_drops_the_connection(tmp_path: Path) -> None:
    async with serving(tmp_path, lambda _: ok() + ok(b'{"warnings":["stale"]}')) as (
            server, client):
        assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
        # The next request must not be answered by the stale second reply.
        assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
    assert server.connections == 2


async def test_server_closing_an_idle_connection(tmp_path: Path) -> None:
    # A kept-alive reply, then the server closes the connection while it is idle.
    async with serving(tmp_path, lambda _: ok(), hang_up=True) as (server, client):
        assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
        # The close has reached the client: no pooled connection is reusable any more.
        # Protocol callbacks set no event: poll the client's pool.
        await until(lambda: not any(c.reusable for c in client._idle),
                    what="the client sees the server's close", timeout_s=10, interval_s=0.005)
        assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
    assert server.connections == 2


async def test_long_idle_connection_is_replaced(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "MAX_IDLE_S", 0.0)
    async with serving(tmp_path, lambda _: ok()) as (server, client):
        await client.post(b"{}", 1.0)
        await client.post(b"{}", 1.0)
        await until(lambda: server.eofs >= 1, what="the replaced connection's close arrives",
                    timeout_s=10, interval_s=0.005)
    assert server.connections == 2 and server.eofs >= 1  # the old one was closed, not leaked


async def test_closed_without_a_reply(tmp_path: Path) -> None:
    async with serving(tmp_path, lambda _: None) as (_, client):
        with pytest.raises(WebhookFailure) as failure:
            await client.post(b"{}", 1.0)
    assert failure.value.kind is FailureKind.TRANSPORT
    assert "closed the connection without a reply" in failure.value.reason


async def test_closed_in_the_middle_of_a_reply(tmp_path: Path) -> None:
    cut = ok()[:-5]  # Content-Length promises more than comes before the close
    async with serving(tmp_path, lambda _: cut, hang_up=True) as (_, client):
        with pytest.raises(WebhookFailure) as failure:
            await client.post(b"{}", 1.0)
    assert failure.value.kind is FailureKind.TRANSPORT
    assert "closed in the middle of the reply" in failure.value.reason


async def test_garbage_reply(tmp_path: Path) -> None:
    async with serving(tmp_path, lambda _: b"SSH-2.0-OpenSSH_9.6\r\n\r\n") as (_, client):
        with pytest.raises(WebhookFailure) as failure:
            await client.post(b"{}", 1.0)
    assert failure.value.kind is FailureKind.TRANSPORT
    assert "invalid HTTP reply" in failure.value.reason


async def test_timeout_closes_the_connection_and_the_next_call_works(tmp_path: Path) -> None:
    calls = []

    def script(request: bytes) -> bytes | None:
        calls.append(request)
        return b"" if len(calls) == 1 else ok()  # the first request is never answered

    async with serving(tmp_path, script) as (server, client):
        with pytest.raises(WebhookFailure) as failure:
            await client.post(b"{}", 0.1)
        assert failure.value.kind is FailureKind.TIMEOUT
        assert await client.post(b"{}", 1.0) == {"warnings": ["ok"]}
    assert server.connections == 2  # the late reply could never answer the second request


async def test_bearer_token_that_would_split_the_header(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("abc\r\nX-Injected: 1")
    async with serving(tmp_path, lambda _: ok(), token_file=token) as (server, client):
        with pytest.raises(WebhookFailure) as failure:
            await client.post(b"{}", 1.0)
    assert failure.value.kind is FailureKind.CONNECT
    assert "bearer_token_file" in failure.value.reason and server.requests == []


async def test_bearer_token_is_sent(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    async with serving(tmp_path, lambda _: ok(), token_file=token) as (server, client):
        await client.post(b"{}", 1.0)
    assert b"\r\nAuthorization: Bearer s3cret\r\n" in server.requests[0]


# -- the one retry: a reused connection the server closed before any byte of a reply --------

def scripted(*answers: bytes | None) -> Script:
    """Answer the n-th request (over all connections) with answers[n]; then ok()."""
    queue = list(answers)
    return lambda _: queue.pop(0) if queue else ok()


async def test_reused_connection_closed_unanswered_is_retried_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Request 2 goes out on the kept-alive connection, which the server closes without a
    # byte of reply (what its idle timeout does in the race): sent again on a new one.
    caplog.set_level(logging.DEBUG, logger="bridge.webhooks.client")
    async with serving(tmp_path, scripted(ok(), None)) as (server, client):
        assert await client.post(b'{"n":1}', 1.0) == {"warnings": ["ok"]}
        assert await client.post(b'{"n":2}', 1.0) == {"warnings": ["ok"]}
    assert [r.message for r in caplog.records if "re-sent" in r.message]
    assert client.retries == 1 and server.connections == 2
    assert [r.endswith(b'{"n":2}') for r in server.requests] == [False, True, True]


async def test_never_retried_twice(tmp_path: Path) -> None:
    # The retry's new connection is closed unanswered too: that is the policy's answer.
    async with serving(tmp_path, scripted(ok(), None, None)) as (server, client):
        await client.post(b"{}", 1.0)
        with pytest.raises(WebhookFailure) as failure:
            await client.post(b"{}", 1.0)
    assert failure.value.kind is FailureKind.TRANSPORT
    assert "closed the connection without a reply" in failure.value.reason
    assert client.retries == 1 and len(server.requests) == 3 and server.connections == 2


async def test_fresh_connection_closed_unanswered_is_not_retried(tmp_path: Path) -> None:
    async with serving(tmp_path, scripted(None)) as (server, client):
        with pytest.raises(WebhookFailure) as failure:
            await client.post(b"{}", 1.0)
    assert failure.value.kind is FailureKind.TRANSPORT
    assert client.retries == 0 and len(server.requests) == 1


@pytest.mark.parametrize("started", [
    ok()[:20],  # the status line had begun
    b"HTTP/1.1 100 Continue\r\n\r\n",  # only an interim reply: a reply had still started
])
async def test_not_retried_once_a_reply_started(tmp_path: Path, started: bytes) -> None:
    async with serving(tmp_path, scripted(ok(), started), hang_up=False) as (server, client):
        await client.post(b"{}", 1.0)
        server.hang_up = True  # the partial reply is followed by the close
        with pytest.raises(WebhookFailure) as failure:
            await client.post(b"{}", 1.0)
    assert failure.value.kind is FailureKind.TRANSPORT
    assert "in the middle of the reply" in failure.value.reason
    assert client.retries == 0 and len(server.requests) == 2


async def test_retry_stays_inside_the_budget(tmp_path: Path) -> None:
    # The retry's connection never answers: the call ends at its budget, not later.
    async with serving(tmp_path, scripted(ok(), None, b"")) as (server, client):
        await client.post(b"{}", 1.0)
        with pytest.raises(WebhookFailure) as failure:
            await client.post(b"{}", 0.2)
    assert failure.value.kind is FailureKind.TIMEOUT and client.retries == 1
    assert len(server.requests) == 3


async def test_retries_are_a_metric(tmp_path: Path) -> None:
    metrics = BridgeMetrics()
    async with serving(tmp_path, scripted(ok(), None)) as (_, client):
        metrics.add_retries("p", lambda: client.retries)
        await client.post(b"{}", 1.0)
        await client.post(b"{}", 1.0)
    assert b'nri_webhook_bridge_webhook_retries_total{webhook="p"} 1.0' in metrics.exposition()
