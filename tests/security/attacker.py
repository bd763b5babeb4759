"""The attacker the security tests play: a second, unprivileged local user.

Every finding of the trust issues is tried the way an attacker would try it: from another uid on
the same node, against the real bridge and policy server processes, over loopback or the Unix
sockets they listen on. The attacker's programs run with the system Python (`/usr/bin/python3`,
isolated mode, standard library only), because the project's `.venv` lives under a home directory
that other users cannot read, and an attacker has no use for our libraries anyway.

Where the tests do not run as root no second uid can be made: `attacker()` then skips the test
with a printed reason (never silently).
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

USER = "nwb-attacker"
PYTHON = "/usr/bin/python3"
RUN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Attacker:
    """The unprivileged user: its uid and gid, and how to run code as it."""

    uid: int
    gid: int

    def run(self, script: str, *args: str, timeout_s: float = RUN_TIMEOUT_S,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Runs `script` (Python source, standard library only) as the attacker."""
        return subprocess.run(
            [PYTHON, "-I", "-c", script, *args], user=self.uid, group=self.gid,
            extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin", **(env or {})},
            capture_output=True, text=True, timeout=timeout_s, check=False)

    def request(self, address: str, method: str, path: str, *, body: bytes | str | None = None,
                headers: dict[str, str] | None = None,
                timeout_s: float = 10.0) -> HttpAnswer:
        """One HTTP/1.1 request as the attacker; `address` is `unix:/path` or `host:port`,
        `https://host:port` for TLS without certificate checks (the attacker's own choice)."""
        payload = body.decode() if isinstance(body, bytes) else body
        done = self.run(CLIENT, address, method, path, json.dumps(payload),
                        json.dumps(headers or {}), str(timeout_s), timeout_s=timeout_s + 30)
        if done.returncode != 0:
            raise AssertionError(f"the attacker's client failed: {done.stderr.strip()}")
        answer = json.loads(done.stdout)
        return HttpAnswer(status=answer["status"], headers=answer["headers"],
                          body=answer["body"], error=answer["error"])

    def can_read(self, path: Path) -> bool:
        done = self.run("import sys; open(sys.argv[1], 'rb').read(1)", str(path))
        return done.returncode == 0


@dataclass(frozen=True)
class HttpAnswer:
    """What the attacker got back: a status (0 when the connection failed or was refused,
    `error` then says how), the headers and the body as text."""

    status: int
    headers: dict[str, str]
    body: str
    error: str

    def json(self) -> Any:
        return json.loads(self.body)


# The attacker's HTTP client: standard library only, run by `/usr/bin/python3 -I`.
CLIENT = r'''
import http.client, json, socket, ssl, sys
address, method, path, body, headers, timeout = sys.argv[1:7]
body = json.loads(body)
headers = json.loads(headers)
timeout = float(timeout)

class UnixConnection(http.client.HTTPConnection):
    def __init__(self, sock_path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.sock_path = sock_path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.sock_path)

try:
    if address.startswith("unix:"):
        conn = UnixConnection(address[5:], timeout)
    elif address.startswith("https://"):
        host, port = address[8:].rsplit(":", 1)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection(host, int(port), timeout=timeout, context=context)
    else:
        host, port = address.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    conn.request(method, path, body=None if body is None else body.encode(), headers=headers)
    response = conn.getresponse()
    text = response.read().decode(errors="replace")
    print(json.dumps({"status": response.status, "headers": dict(response.getheaders()),
                      "body": text, "error": ""}))
except Exception as exc:
    print(json.dumps({"status": 0, "headers": {}, "body": "",
                      "error": f"{type(exc).__name__}: {exc}"}))
'''


def attacker() -> Attacker:
    """The unprivileged user, made once per machine (a system account without a home or a
    shell). Skips the calling test, with the reason printed, where the tests are not root."""
    if os.geteuid() != 0:
        reason = "the security tests need root to create a second, unprivileged uid"
        print(f"SKIP: {reason}", file=sys.stderr)
        pytest.skip(reason)
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", USER], check=True, capture_output=True)
        entry = pwd.getpwnam(USER)
    if entry.pw_uid == 0:
        raise AssertionError(f"{USER} must not be uid 0")
    return Attacker(uid=entry.pw_uid, gid=entry.pw_gid)
