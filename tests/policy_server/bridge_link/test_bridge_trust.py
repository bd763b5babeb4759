"""Whom the control client trusts (control_client.BridgeTrust): the peer uid of a Unix socket,
https with the bridge's CA, plain http only with the opt-in."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from policy_server.bridge_link.control_client import BridgeControl, BridgePeerError, BridgeTrust
from policy_server.exceptions import BridgeControlError

STATE = b'{"pods": [], "containers": []}'


async def serve_state(path: Path) -> asyncio.AbstractServer:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(STATE), STATE))
        await writer.drain()
        writer.close()

    return await asyncio.start_unix_server(answer, str(path))


async def test_a_socket_served_by_an_allowed_uid_is_used(tmp_path: Path) -> None:
    server = await serve_state(tmp_path / "c.sock")
    bridge = BridgeControl(f"unix://{tmp_path / 'c.sock'}")  # served by this uid
    try:
        assert (await bridge.state()).pods == []
    finally:
        await bridge.aclose()
        server.close()


async def test_a_socket_served_by_another_uid_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This process plays "another uid": the trusted set is made not to contain it.
    server = await serve_state(tmp_path / "c.sock")
    me = os.geteuid()
    monkeypatch.setattr(BridgeTrust, "allowed_uids", lambda self: frozenset({me + 1}))
    bridge = BridgeControl(f"unix://{tmp_path / 'c.sock'}")
    try:
        with pytest.raises(BridgePeerError, match=f"served by uid {me} .*--bridge-control-uid"):
            await bridge.state()
    finally:
        await bridge.aclose()
        server.close()


def test_the_trusted_uids_are_root_this_process_and_the_given_ones() -> None:
    assert BridgeTrust(uids=frozenset({1234})).allowed_uids() == {0, os.geteuid(), 1234}


def test_plain_http_needs_the_opt_in() -> None:
    with pytest.raises(BridgeControlError, match="plain http is refused"):
        BridgeControl("http://127.0.0.1:1")
    BridgeControl("http://127.0.0.1:1", trust=BridgeTrust(insecure=True))


def test_https_needs_the_bridges_ca(tmp_path: Path) -> None:
    with pytest.raises(BridgeControlError, match="--bridge-control-ca"):
        BridgeControl("https://127.0.0.1:1")
    with pytest.raises(BridgeControlError, match="TLS files"):
        BridgeControl("https://127.0.0.1:1", trust=BridgeTrust(ca=tmp_path / "missing.pem"))


def test_a_token_file_is_not_read_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("s3cret\n")
    (tmp_path / "token").symlink_to(tmp_path / "secret")
    with pytest.raises(BridgeControlError, match="--bridge-control-token-file"):
        BridgeControl(f"unix://{tmp_path}/c.sock", trust=BridgeTrust(token_file=tmp_path / "token"))
