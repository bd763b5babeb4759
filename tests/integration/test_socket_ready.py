"""A Unix socket of ours appears only once it accepts: a client that connects the moment the
file appears is never refused (bridge/transport/listen.py: bind a temporary name, listen,
rename into place).

The watcher is a thread that stats the path in a tight loop and connects as soon as it
exists — as close to "the moment the file appears" as a client can get. It runs against
the code both programs create their sockets with (the policy server's --uds and the
bridge's control API), 200 starts in-process, and against real `nri-policy-server --rules`
processes, whose socket the bridge's first event after a restart of the pair hits.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from bridge.control.serving import control_listener
from bridge.transport.listen import unix_listener
from tests.hardening.processes import POLICY_SERVER

ROOT = Path(__file__).resolve().parents[2]
CEILING_S = 60.0  # only catches a hang


class Watcher(threading.Thread):
    """Connects to `path` the moment it exists; `outcome` is "accepted" or the error."""

    def __init__(self, path: Path, request: bytes | None = None) -> None:
        super().__init__(daemon=True)
        self.path, self.request = str(path), request
        self.outcome = ""
        self.reply = b""
        self.stop = threading.Event()

    def run(self) -> None:
        while not os.path.lexists(self.path):
            if self.stop.is_set():
                self.outcome = "gave up"
                return
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(CEILING_S)
        try:
            probe.connect(self.path)
            self.outcome = "accepted"
            if self.request is not None:
                probe.sendall(self.request)
                while b"\r\n\r\n" not in self.reply:
                    data = probe.recv(4096)
                    if not data:
                        break
                    self.reply += data
        except OSError as exc:
            self.outcome = f"{type(exc).__name__}: {exc}"
        finally:
            probe.close()


def test_two_hundred_in_process_starts(tmp_path: Path) -> None:
    path = tmp_path / "ready.sock"
    outcomes = []
    for n in range(200):
        watcher = Watcher(path)
        watcher.start()
        make = unix_listener if n % 2 else control_listener  # both programs' entry points
        sock = make(str(path), 0o600)
        watcher.join(CEILING_S)
        outcomes.append(watcher.outcome)
        assert os.stat(path).st_mode & 0o777 == 0o600
        sock.close()
        path.unlink()
    refused = [o for o in outcomes if o != "accepted"]
    assert refused == [], f"{len(refused)} of 200 connections refused: {refused[:3]}"
    assert list(tmp_path.iterdir()) == []  # no staging name left behind


@pytest.mark.processes
def test_policy_server_processes(tmp_path: Path) -> None:
    path = tmp_path / "policy.sock"
    request = b"GET /healthz HTTP/1.1\r\nHost: policy\r\nConnection: close\r\n\r\n"
    for n in range(8):
        watcher = Watcher(path, request)
        watcher.start()
        log = (tmp_path / f"policy-{n}.log").open("wb")
        proc = subprocess.Popen([str(POLICY_SERVER), "--uds", str(path), "--rules",
                                 str(ROOT / "examples" / "koordinator-rules.yaml"),
                                 "--log-level", "warning"], stdout=log, stderr=log)
        try:
            watcher.join(CEILING_S)
            assert watcher.outcome == "accepted", f"start {n}: {watcher.outcome}"
            assert watcher.reply.startswith(b"HTTP/1.1 200 "), watcher.reply[:200]
        finally:
            watcher.stop.set()
            proc.terminate()
            proc.wait(CEILING_S)
            log.close()
        assert not path.exists()  # removed on the way out
