"""The request guard (bridge.listening.http_guard), unit-level: each check refuses the one
mutated request it is about and lets the good one through, and the uvicorn internals the
bounded protocol extends are still where it expects them."""

from __future__ import annotations

import asyncio
import inspect
import socket
from typing import Any

import pytest
from uvicorn.protocols.http import httptools_impl

from bridge.listening.bounded_protocol import PEER_KEY
from bridge.listening.http_guard import (
    ENV_READER_KEY,
    GuardSettings,
    ListenerGuard,
    allowed_names,
    host_name,
    origin_host,
)
from bridge.listening.listener_config import (
    Access,
    Bounds,
    ListenerConfigError,
    TlsFiles,
    check_tcp_access,
)
from bridge.listening.peer_creds import PeerCreds, PeerRule, peer_creds

ROOT = PeerCreds(1, 0, 0)
OTHER = PeerCreds(2, 1000, 1000, frozenset({1000, 50}))
GOOD = {"host": "127.0.0.1:9000", "content-type": "application/json",
        "content-length": "2", "authorization": "Bearer s3cret"}


def _run(guard: ListenerGuard, method: str = "POST", path: str = "/v1/updates",
         headers: dict[str, str] | None = None, peer: PeerCreds | None = None,
         body: list[bytes] | None = None) -> tuple[int, dict[str, Any]]:
    pairs = (GOOD if headers is None else headers).items()
    scope: dict[str, Any] = {"type": "http", "method": method, "path": path, "scheme": "http",
                             "headers": [(k.encode(), v.encode()) for k, v in pairs]}
    if peer is not None:
        scope[PEER_KEY] = peer
    chunks = list(body or [b"{}"])
    sent: list[dict[str, Any]] = []
    reached: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        chunk = chunks.pop(0) if chunks else b""
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.update(scope)
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    guard.app = app
    asyncio.run(guard(scope, receive, send))  # type: ignore[arg-type]
    return sent[0]["status"], reached


def _tcp(**kw: Any) -> ListenerGuard:
    return ListenerGuard(lambda *a: None, GuardSettings(  # type: ignore[arg-type]
        bounds=Bounds(max_body_bytes=10), token=b"s3cret", check_host=True,
        allowed_hosts=allowed_names("127.0.0.1", ()), **kw))


@pytest.mark.parametrize(("change", "status"), [
    ({}, 200),
    ({"authorization": None}, 401),
    ({"authorization": "Bearer s3creT"}, 401),
    ({"authorization": "Basic s3cret"}, 401),
    ({"host": "evil.example:9000"}, 403),
    ({"host": None}, 403),
    ({"origin": "http://evil.example"}, 403),
    ({"origin": "null"}, 403),
    ({"origin": "http://localhost:9000"}, 200),
    ({"content-type": "text/plain"}, 415),
    ({"content-type": None}, 415),
    ({"content-type": "application/json-patch"}, 415),
    ({"content-type": "Application/JSON; charset=utf-8"}, 200),
    ({"content-length": "11"}, 413),
    ({"content-length": "-1"}, 413),
])
def test_each_check_refuses_its_mutation(change: dict[str, str | None], status: int) -> None:
    headers = {**GOOD, **change}
    assert _run(_tcp(), headers={k: v for k, v in headers.items() if v is not None})[0] == status


def test_a_chunked_body_past_the_limit_is_cut_with_413() -> None:
    headers = {k: v for k, v in GOOD.items() if k != "content-length"}
    assert _run(_tcp(), headers=headers, body=[b"12345", b"678901"])[0] == 413
    assert _run(_tcp(), headers=headers, body=[b"12345", b"67890"])[0] == 200


def test_get_needs_no_content_type_but_still_the_token_and_host() -> None:
    headers = {"host": "localhost", "authorization": "Bearer s3cret"}
    assert _run(_tcp(), "GET", "/v1/state", headers)[0] == 200
    assert _run(_tcp(), "GET", "/v1/state", {"host": "localhost"})[0] == 401
    assert _run(_tcp(), "GET", "/v1/state", {**headers, "host": "rebind.example"})[0] == 403


def test_the_unix_peer_rule_and_env_readers() -> None:
    guard = ListenerGuard(lambda *a: None, GuardSettings(  # type: ignore[arg-type]
        bounds=Bounds(), peer_rule=PeerRule(frozenset({0}), frozenset({50}))))
    headers = {"content-type": "application/json", "content-length": "2"}
    status, scope = _run(guard, headers=headers, peer=ROOT)
    assert status == 200 and scope[ENV_READER_KEY] is True
    status, scope = _run(guard, headers=headers, peer=OTHER)  # gid 50 is a supplementary group
    assert status == 200 and scope[ENV_READER_KEY] is False
    stranger = PeerCreds(3, 1000, 1000, frozenset({1000}))
    assert _run(guard, headers=headers, peer=stranger)[0] == 403


def test_host_and_origin_parsing() -> None:
    assert [host_name(h) for h in ("LocalHost:80", "[::1]:9", "::1", "a.b")] == [
        "localhost", "::1", "::1", "a.b"]
    assert [origin_host(o) for o in ("http://x:1", "null", "x", "http://x/p")] == [
        "x", None, None, None]
    assert allowed_names("0.0.0.0", ("Node.Example",)) == frozenset(
        {"localhost", "127.0.0.1", "::1", "node.example"})


def test_tcp_without_authentication_is_refused_unless_insecure(
        caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ListenerConfigError, match="needs authentication"):
        check_tcp_access(Access(), "here")
    with pytest.raises(ListenerConfigError, match="needs authentication"):  # TLS alone: no peer
        check_tcp_access(Access(tls=TlsFiles("/c", "/k")), "here")
    check_tcp_access(Access(bearer_token_file="/t"), "here")
    check_tcp_access(Access(tls=TlsFiles("/c", "/k", "/ca")), "here")
    check_tcp_access(Access(insecure=True), "here")
    assert "INSECURE" in caplog.text


def test_peer_creds_of_a_socketpair_are_ours() -> None:
    import os
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        creds = peer_creds(left)
    assert creds is not None and (creds.pid, creds.uid, creds.gid) == (
        os.getpid(), os.geteuid(), os.getegid())
    with socket.socket() as tcp:
        assert peer_creds(tcp) is None


def test_the_uvicorn_callbacks_the_bounded_protocol_extends_exist() -> None:
    cls = httptools_impl.HttpToolsProtocol
    for name in ("connection_made", "connection_lost", "data_received", "send_400_response",
                 "on_message_begin", "on_url", "on_header", "on_headers_complete",
                 "on_message_complete"):
        assert inspect.isfunction(getattr(cls, name, None)), name
    source = inspect.getsource(cls.__init__)
    for attribute in ("self.connections", "self.loop", "self.scope"):
        assert attribute in source or attribute in inspect.getsource(cls), attribute
