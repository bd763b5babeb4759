"""The attacker itself: it is another uid, and it cannot do what that uid may not."""

from __future__ import annotations

import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.security.attacker import Attacker

pytestmark = pytest.mark.processes  # starts processes: not in make check


def test_the_attacker_is_not_root_and_cannot_read_a_root_only_file(evil: Attacker,
                                                                  workdir: Path) -> None:
    done = evil.run("import os; print(os.getuid(), os.geteuid(), os.getgroups())")
    assert done.returncode == 0, done.stderr
    uid, euid, *_ = done.stdout.split()
    assert int(uid) == evil.uid != 0 and int(euid) == evil.uid
    secret = workdir / "secret"
    secret.write_text("s3cret")
    secret.chmod(0o600)
    assert not evil.can_read(secret)
    secret.chmod(0o644)
    assert evil.can_read(secret)


def test_the_attackers_client_speaks_http_over_tcp_and_reports_refusals(evil: Attacker) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            body = self.rfile.read(length)
            self.send_response(201)
            self.send_header("X-Echo", self.headers.get("X-Test", ""))
            self.end_headers()
            self.wfile.write(body[::-1])

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        answer = evil.request(f"127.0.0.1:{port}", "POST", "/x", body="abc",
                              headers={"X-Test": "t"})
        assert (answer.status, answer.body, answer.headers["X-Echo"]) == (201, "cba", "t")
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    refused = evil.request(f"127.0.0.1:{free}", "GET", "/")
    assert refused.status == 0 and "Refused" in refused.error


def test_a_0600_unix_socket_of_root_refuses_the_attacker(evil: Attacker, workdir: Path) -> None:
    path = workdir / "s.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        os.chmod(path, 0o600)
        listener.listen()
        answer = evil.request(f"unix:{path}", "GET", "/")
    assert answer.status == 0 and "Permission" in answer.error
