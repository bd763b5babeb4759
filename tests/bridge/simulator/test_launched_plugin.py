"""The simulator starts a launched plugin's process as the runtime does
(bridge.simulator.launched_plugin): its socket is fd 3 and no other fd is open beyond stdio,
stdio is /dev/null, the environment is exactly the three NRI_PLUGIN_* variables; and the
process handle polls, waits, times out and kills."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from bridge.simulator.launched_plugin import spawn_plugin

pytestmark = pytest.mark.processes  # starts processes: not in make check

# The child reports what it was given on its fd 3 and exits.
_REPORT = """
import json, os, socket
fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
targets = {n: os.readlink(f"/proc/self/fd/{n}") for n in (0, 1, 2)}
sock = socket.socket(fileno=3)
kind = sock.family.name, sock.type.name
# As exec'd (Python itself adds LC_CTYPE to os.environ when no locale is set, PEP 538).
with open("/proc/self/environ", "rb") as f:
    env = dict(v.decode().split("=", 1) for v in f.read().split(b"\\0") if v)
sock.sendall(json.dumps({"env": env, "fds": fds, "stdio": targets,
                         "kind": kind}).encode())
sock.close()
"""


def _received(ours: socket.socket) -> dict[str, object]:
    ours.settimeout(60)
    chunks = []
    while chunk := ours.recv(65536):
        chunks.append(chunk)
    ours.close()
    report = json.loads(b"".join(chunks))
    assert isinstance(report, dict)
    return report


def test_the_plugin_gets_fd_3_a_bare_environment_and_no_stdio() -> None:
    ours, proc = spawn_plugin([sys.executable, "-c", _REPORT], "webhook-bridge", "07")
    report = _received(ours)
    assert proc.wait(timeout=60) == 0 and proc.returncode == 0
    assert report["env"] == {"NRI_PLUGIN_NAME": "webhook-bridge", "NRI_PLUGIN_IDX": "07",
                             "NRI_PLUGIN_SOCKET": "3"}
    # 0-2 and the socket; the one more is listdir's own handle on /proc/self/fd (the socket
    # object is made after the listing).
    fds = report["fds"]
    assert isinstance(fds, list) and fds[:4] == [0, 1, 2, 3] and len(fds) == 5, fds
    assert report["stdio"] == {"0": "/dev/null", "1": "/dev/null", "2": "/dev/null"}
    assert report["kind"] == ["AF_UNIX", "SOCK_STREAM"]


def test_the_program_is_looked_up_on_path() -> None:
    ours, proc = spawn_plugin(["true"], "p", "01")
    ours.close()
    assert proc.wait(timeout=60) == 0


def test_a_process_that_does_not_exit_times_out_and_is_killed() -> None:
    ours, proc = spawn_plugin([sys.executable, "-c", "import time; time.sleep(600)"], "p", "01")
    try:
        assert proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)
        proc.kill()
        assert proc.wait(timeout=60) == -9
        proc.kill()  # reaped already: nothing to signal, no error
        assert proc.poll() == -9
    finally:
        ours.close()
        if proc.returncode is None:
            proc.kill()
            proc.wait(timeout=60)


def _sockets() -> int:
    """How many sockets this process has open."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
        except FileNotFoundError:
            continue  # listdir's own fd, closed once it returned
    return count


def test_a_missing_program_raises_and_closes_the_runtime_end() -> None:
    before = _sockets()
    with pytest.raises(FileNotFoundError) as raised:
        spawn_plugin(["/nonexistent/plugin"], "p", "01")
    # Counted while the traceback (and so spawn_plugin's frame) is alive: both ends of the
    # socketpair are closed by spawn_plugin itself, not by the garbage collector later.
    assert _sockets() == before, raised.traceback
