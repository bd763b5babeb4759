"""Issue 43, listeners: every listener of both products knows its peer.

Tried as the unprivileged attacker uid against the real processes: the bridge (`python -m
bridge run` on the runtime simulator) and `nri-policy-server`. On the main branch before this
work the TCP control address served the attacker every container's environment and took its
updates, `text/plain` and foreign Host/Origin were accepted, the policy server listened on
0.0.0.0 without authentication, and a Unix socket served any uid that could open it.
"""

from __future__ import annotations

import asyncio
import grp
import json
import os
import ssl
from pathlib import Path

import httpx
import pytest

from tests.hardening.policy_tls import temporary_pki
from tests.security.attacker import Attacker, HttpAnswer
from tests.security.listener_rig import (
    SECRET,
    free_port,
    running_bridge,
    running_policy_server,
    start_policy_server,
)
from tests.waiting import until_exited

pytestmark = pytest.mark.processes  # starts processes: not in make check

SECRET_VALUE = SECRET.partition("=")[2]
UPDATE = json.dumps({"update": [{"container_id": "x" * 64,
                                 "linux": {"resources": {"memory": {"limit": 8388608}}}}]})


async def _as(evil: Attacker, address: str, method: str, path: str, *,
              body: str | None = None, headers: dict[str, str] | None = None) -> HttpAnswer:
    # The runtime simulator runs on this loop: the attacker's client runs in a thread.
    return await asyncio.to_thread(evil.request, address, method, path, body=body,
                                   headers=headers)


async def _root_get(sock: Path, path: str) -> httpx.Response:
    transport = httpx.AsyncHTTPTransport(uds=str(sock))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost",
                                 timeout=10) as client:
        return await client.get(path)


async def test_control_address_without_authentication_refuses_to_start(workdir: Path) -> None:
    port = free_port()
    async with running_bridge(workdir, extra=["--control-address", f"127.0.0.1:{port}"],
                              wait=False) as (bridge, _):
        code = await until_exited(bridge.proc, what="the bridge refuses to start",
                                  timeout_s=30, details=bridge.log_text)
    assert code == 1
    assert "needs authentication" in bridge.log_text()
    assert "--insecure" in bridge.log_text()


async def test_insecure_control_address_warns_and_never_shows_env_values(
        evil: Attacker, workdir: Path) -> None:
    port = free_port()
    async with running_bridge(workdir, extra=["--control-address", f"127.0.0.1:{port}",
                                              "--insecure"]) as (bridge, _):
        state = await _as(evil, f"127.0.0.1:{port}", "GET", "/v1/state")
        assert "INSECURE" in bridge.log_text()
    assert state.status == 200, state
    assert SECRET_VALUE not in state.body
    envs = [e for c in state.json()["containers"] for e in c.get("env", [])]
    assert [e for e in envs if e.startswith("POSTGRES_PASSWORD")] == [
        "POSTGRES_PASSWORD=<redacted>"]


async def test_attacker_without_the_token_reads_and_changes_nothing(
        evil: Attacker, workdir: Path) -> None:
    port = free_port()
    token = workdir / "token"
    token.write_text("t0ken-" + "a" * 40 + "\n")
    token.chmod(0o600)
    address = f"127.0.0.1:{port}"
    async with running_bridge(workdir, extra=["--control-address", address,
                                              "--control-bearer-token-file", str(token)]) as (
            bridge, runtime):
        before = {cid: c.linux.resources.SerializeToString()
                  for cid, c in runtime.state.containers.items()}
        state = await _as(evil, address, "GET", "/v1/state")
        wrong = await _as(evil, address, "GET", "/v1/state",
                          headers={"Authorization": "Bearer t0ken-" + "a" * 39 + "b"})
        victim = next(iter(runtime.state.containers))
        update = json.dumps({"update": [{"container_id": victim, "linux": {"resources": {
            "memory": {"limit": 8388608}, "cpu": {"cpus": "0"}}}}]})
        posted = await _as(evil, address, "POST", "/v1/updates", body=update,
                           headers={"Content-Type": "application/json"})
        good = await _as(evil, address, "GET", "/v1/state",
                         headers={"Authorization": f"Bearer {token.read_text().strip()}"})
        root = await _root_get(bridge.control_sock, "/v1/state")
        after = {cid: c.linux.resources.SerializeToString()
                 for cid, c in runtime.state.containers.items()}
    assert (state.status, wrong.status, posted.status) == (401, 401, 401)
    assert SECRET_VALUE not in state.body + wrong.body + posted.body
    assert before == after  # nothing reached the runtime
    # The token holder over TCP sees the names, not the values; root over the socket both.
    assert good.status == 200 and SECRET_VALUE not in good.body
    assert "POSTGRES_PASSWORD=<redacted>" in good.body
    assert root.status_code == 200 and SECRET in root.text


async def test_state_changes_need_json_and_the_listeners_own_host_and_origin(
        evil: Attacker, workdir: Path) -> None:
    port = free_port()
    token = workdir / "token"
    token.write_text("tok-" + "z" * 32)
    address = f"127.0.0.1:{port}"
    auth = {"Authorization": "Bearer tok-" + "z" * 32}
    empty = json.dumps({"update": []})
    async with running_bridge(workdir, extra=["--control-address", address,
                                              "--control-bearer-token-file", str(token)]):
        answers = {
            "text/plain": await _as(evil, address, "POST", "/v1/updates", body=empty,
                                    headers={**auth, "Content-Type": "text/plain"}),
            "no content type": await _as(evil, address, "POST", "/v1/updates", body=empty,
                                         headers=auth),
            "foreign Host": await _as(evil, address, "POST", "/v1/updates", body=empty,
                                      headers={**auth, "Content-Type": "application/json",
                                               "Host": f"attacker.example:{port}"}),
            "foreign Host on GET": await _as(evil, address, "GET", "/v1/state",
                                             headers={**auth, "Host": "rebind.example"}),
            "foreign Origin": await _as(evil, address, "POST", "/v1/updates", body=empty,
                                        headers={**auth, "Content-Type": "application/json",
                                                 "Origin": "http://attacker.example"}),
            "json": await _as(evil, address, "POST", "/v1/updates", body=empty,
                              headers={**auth, "Content-Type": "application/json"}),
            "json, loopback Origin": await _as(
                evil, address, "POST", "/v1/updates", body=empty,
                headers={**auth, "Content-Type": "application/json; charset=utf-8",
                         "Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}),
        }
    statuses = {case: a.status for case, a in answers.items()}
    assert statuses == {"text/plain": 415, "no content type": 415, "foreign Host": 403,
                        "foreign Host on GET": 403, "foreign Origin": 403, "json": 200,
                        "json, loopback Origin": 200}, answers


async def test_a_0660_control_socket_refuses_the_attacker_at_connect(
        evil: Attacker, workdir: Path) -> None:
    async with running_bridge(workdir) as (bridge, _):
        mode = bridge.control_sock.stat().st_mode & 0o777
        answer = await _as(evil, f"unix:{bridge.control_sock}", "GET", "/healthz")
    assert mode == 0o660
    assert answer.status == 0 and "Permission" in answer.error


async def test_the_peer_check_refuses_an_attacker_who_can_open_the_socket(
        evil: Attacker, workdir: Path) -> None:
    async with running_bridge(workdir) as (bridge, _):
        # The attacker is given the socket's group (as a careless chgrp would): it can now
        # connect, and its uid is still refused while root is served.
        os.chown(bridge.control_sock, 0, evil.gid)
        refused = await _as(evil, f"unix:{bridge.control_sock}", "GET", "/healthz")
        posted = await _as(evil, f"unix:{bridge.control_sock}", "POST", "/v1/updates",
                           body=UPDATE, headers={"Content-Type": "application/json"})
        root = await _root_get(bridge.control_sock, "/healthz")
    assert refused.status == 403 and f"peer uid {evil.uid}" in refused.body
    assert posted.status == 403
    assert root.status_code == 200


async def test_a_configured_peer_is_served_but_reads_no_env_values(
        evil: Attacker, workdir: Path) -> None:
    config = {"control": {"socket": str(workdir / "control.sock"),
                          "allowed_uids": [0, evil.uid]}}
    async with running_bridge(workdir, config=config) as (bridge, _):
        os.chown(bridge.control_sock, 0, evil.gid)
        state = await _as(evil, f"unix:{bridge.control_sock}", "GET", "/v1/state")
        root = await _root_get(bridge.control_sock, "/v1/state")
    assert state.status == 200, state
    assert SECRET_VALUE not in state.body
    assert "POSTGRES_PASSWORD=<redacted>" in state.body
    assert SECRET in root.text


async def test_policy_server_on_tcp_without_authentication_refuses_to_start(
        workdir: Path) -> None:
    process = await start_policy_server(workdir, "--host", "0.0.0.0", "--port",
                                        str(free_port()))
    code = await until_exited(process.proc, what="the policy server refuses to start",
                              timeout_s=60, details=process.log_text)
    assert code == 2
    assert "needs authentication" in process.log_text() and "--insecure" in process.log_text()


async def test_policy_server_insecure_warns_and_still_wants_json(
        evil: Attacker, workdir: Path) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    body = json.dumps({"event": "CreateContainer"})
    async with running_policy_server(workdir, "--host", "127.0.0.1", "--port", str(port),
                                     "--insecure", port=port) as process:
        none = await _as(evil, address, "POST", "/v1/policies/bench", body=body)
        text = await _as(evil, address, "POST", "/v1/policies/bench", body=body,
                         headers={"Content-Type": "text/plain"})
        foreign = await _as(evil, address, "POST", "/v1/policies/bench", body=body,
                            headers={"Content-Type": "application/json",
                                     "Host": "attacker.example"})
        json_ok = await _as(evil, address, "POST", "/v1/policies/bench", body=body,
                            headers={"Content-Type": "application/json"})
        log = process.log_text()
    assert "INSECURE" in log
    assert (none.status, text.status, foreign.status) == (415, 415, 403)
    assert json_ok.status == 422  # reached the decoder


async def test_policy_server_mutual_tls_refuses_a_client_without_a_certificate(
        evil: Attacker, workdir: Path) -> None:
    port = free_port()
    with temporary_pki() as pki:
        async with running_policy_server(
                workdir, "--host", "127.0.0.1", "--port", str(port),
                "--tls-cert-file", str(pki.server_cert), "--tls-key-file", str(pki.server_key),
                "--tls-client-ca-file", str(pki.ca), port=port):
            attacker = await _as(evil, f"https://127.0.0.1:{port}", "GET", "/healthz")
            context = ssl.create_default_context(cafile=str(pki.ca))
            context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
            async with httpx.AsyncClient(verify=context, timeout=10) as client:
                good = await client.get(f"https://127.0.0.1:{port}/healthz")
    assert attacker.status == 0, attacker  # handshake refused
    assert good.status_code == 200


async def test_a_tls_key_or_token_the_attacker_owns_is_refused_at_start(
        evil: Attacker, workdir: Path) -> None:
    port = free_port()
    with temporary_pki() as pki:
        os.chown(pki.server_key, evil.uid, evil.gid)  # the attacker's key: it knows it
        process = await start_policy_server(
            workdir, "--host", "127.0.0.1", "--port", str(port),
            "--tls-cert-file", str(pki.server_cert), "--tls-key-file", str(pki.server_key),
            "--tls-client-ca-file", str(pki.ca))
        code = await until_exited(process.proc, what="the policy server refuses its key",
                                  timeout_s=60, details=process.log_text)
        assert code == 2
        assert f"TLS key_file {pki.server_key}: owned by uid {evil.uid}" in process.log_text()
    token = workdir / "token"
    token.write_text("t0ken\n")
    token.chmod(0o666)  # any local user may write the token the listener accepts
    process = await start_policy_server(workdir, "--host", "127.0.0.1", "--port", str(port),
                                        "--bearer-token-file", str(token))
    code = await until_exited(process.proc, what="the policy server refuses its token",
                              timeout_s=60, details=process.log_text)
    assert code == 2
    assert f"bearer token file {token}: file writable by others" in process.log_text()


async def test_policy_socket_peer_check(evil: Attacker, workdir: Path) -> None:
    sock = workdir / "policy.sock"
    async with running_policy_server(workdir, "--uds", str(sock), "--socket-mode", "0660",
                                     sock=sock):
        os.chown(sock, 0, evil.gid)
        refused = await _as(evil, f"unix:{sock}", "GET", "/healthz")
        root = await _root_get(sock, "/healthz")
    assert refused.status == 403, refused
    assert root.status_code == 200
    assert grp.getgrgid(evil.gid)  # the attacker's own group, not root's


async def test_a_symlink_or_a_file_at_the_control_socket_path_is_refused(workdir: Path) -> None:
    target = workdir / "elsewhere"
    target.write_text("not ours")
    for kind in ("symlink", "file"):
        sock = workdir / "control.sock"
        if kind == "symlink":
            sock.symlink_to(target)
        else:
            sock.write_text("a file")
        async with running_bridge(workdir, wait=False) as (bridge, _):
            code = await until_exited(bridge.proc, what=f"the bridge refuses the {kind}",
                                      timeout_s=30, details=bridge.log_text)
        assert code == 1
        expected = "is a symlink" if kind == "symlink" else "exists and is not a socket"
        assert expected in bridge.log_text(), bridge.log_text()
        assert target.read_text() == "not ours"
        sock.unlink()
