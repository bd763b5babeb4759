"""The real processes the listener tests attack, and the attacker's raw-socket programs.

`running_bridge` starts `python -m bridge run` against the runtime simulator, seeded with one
pod whose container carries a secret in its environment; `running_policy_server` starts
`nri-policy-server` (the benchmark's trivial policy, node effects off). Both are stopped by
PID. `FLOOD`, `SLOW` and `BIG_BODY` are standard-library programs the attacker runs (bounded in
count and time, loopback only).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from bridge.simulator import SimulatedRuntime
from tests.hardening.processes import (
    POLICY_SERVER,
    REPO,
    BridgeProcess,
    Process,
    bridge_process,
)
from tests.integration.harness import pod_and_container
from tests.waiting import accepts, until

SECRET = "POSTGRES_PASSWORD=hunter2-s3cret"
TRIVIAL_POLICY = REPO / "benchmarks" / "trivial_policy.py"
# deploy/kubernetes/base/daemonset.yaml: both containers are limited to 192Mi.
SHIPPED_LIMIT_KB = 192 * 1024


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.asynccontextmanager
async def running_bridge(workdir: Path, *, config: dict[str, Any] | None = None,
                         extra: Sequence[str] = (), wait: bool = True,
                         ) -> AsyncIterator[tuple[BridgeProcess, SimulatedRuntime]]:
    """The bridge on a simulated runtime whose one container has `SECRET` in its env."""
    nri_sock = workdir / "nri.sock"
    runtime = SimulatedRuntime(nri_sock, "containerd-2.1.9")
    pod, container = pod_and_container("victim")
    container.env.append(SECRET)
    runtime.state.seed([pod], [container])
    await runtime.start()
    try:
        async with bridge_process(workdir, nri_sock, config=config, extra=extra) as bridge:
            if wait:
                await runtime.wait_plugin(20)
                await until(accepts(bridge.control_sock), what="the control socket",
                            timeout_s=15.0, in_thread=True, proc=bridge.proc,
                            details=bridge.log_text)
            yield bridge, runtime
    finally:
        await runtime.stop()


async def start_policy_server(workdir: Path, *args: str) -> Process:
    """`nri-policy-server` with `args` (a listener among them), node effects off."""
    return await Process.start(
        [str(POLICY_SERVER), "--no-koordinator", "--policy-module", str(TRIVIAL_POLICY),
         "--pod-cgroup-writes", "off", "--systemd-properties", "off", *args],
        workdir / "policy.log")


@contextlib.asynccontextmanager
async def running_policy_server(workdir: Path, *args: str, port: int | None = None,
                                sock: Path | None = None) -> AsyncIterator[Process]:
    process = await start_policy_server(workdir, *args)
    try:
        if port is not None:
            await until(lambda: _tcp_accepts(port), what=f"the policy server on port {port}",
                        timeout_s=20.0, in_thread=True, proc=process.proc,
                        details=process.log_text)
        if sock is not None:
            await until(accepts(sock), what=f"the policy server on {sock}", timeout_s=20.0,
                        in_thread=True, proc=process.proc, details=process.log_text)
        yield process
    finally:
        if process.running:
            with contextlib.suppress(AssertionError):
                await process.terminate()
        await process.kill()


def _tcp_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def report(stdout: str) -> Any:
    return json.loads(stdout.strip().splitlines()[-1])


# Opens `count` connections to `address` ("host:port" or "unix:/path"), sends `prefix` on each,
# then `drip` one byte every `interval` seconds until `seconds` pass; prints how many
# connections the server closed and when (seconds since all were open).
FLOOD = r'''
import json, socket, sys, time, resource
address, count, prefix, drip, interval, seconds = sys.argv[1:7]
count, interval, seconds = int(count), float(interval), float(seconds)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
def connect():
    if address.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(address[5:])
    else:
        host, port = address.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=5)
    return s
conns, failed = [], 0
for _ in range(count):
    try:
        s = connect()
        if prefix:
            s.sendall(prefix.encode())
        s.setblocking(False)
        conns.append(s)
    except OSError:
        failed += 1
start = time.monotonic()
closed_at = {}
while time.monotonic() - start < seconds and len(closed_at) < len(conns):
    for i, s in enumerate(conns):
        if i in closed_at:
            continue
        try:
            data = s.recv(4096)
            if data == b"":
                closed_at[i] = time.monotonic() - start
                continue
        except BlockingIOError:
            pass
        except OSError:
            closed_at[i] = time.monotonic() - start
            continue
        if drip:
            try:
                s.send(drip.encode())
            except BlockingIOError:
                pass
            except OSError:
                closed_at[i] = time.monotonic() - start
    time.sleep(interval)
at_first = sum(1 for t in closed_at.values() if t < 1.5)
print(json.dumps({"opened": len(conns), "failed": failed, "closed": len(closed_at),
                  "closed_within_1_5s": at_first,
                  "last_close_s": max(closed_at.values(), default=None)}))
'''

# Sends a request declaring `length` bytes (or chunked when length is 0) to host:port (host
# `unix:/path` and any port for a Unix socket) and
# writes up to `send_limit` body bytes, stopping when the server answers or closes; prints the
# status and how many body bytes got out.
BIG_BODY = r'''
import json, socket, sys, time
host, port, path, length, send_limit = sys.argv[1:6]
length, send_limit = int(length), int(send_limit)
if host.startswith("unix:"):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(host[5:])
else:
    s = socket.create_connection((host, int(port)), timeout=30)
head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
head += f"Content-Length: {length}\r\n" if length else "Transfer-Encoding: chunked\r\n"
s.sendall((head + "\r\n").encode())
chunk = b"[" * 65536
framed = chunk if length else b"%x\r\n" % len(chunk) + chunk + b"\r\n"
sent, answer, pending = 0, b"", b""
s.setblocking(False)
deadline = time.monotonic() + 60
while sent < send_limit and time.monotonic() < deadline:
    try:
        answer += s.recv(65536)
        if answer:
            break
    except BlockingIOError:
        pass
    except OSError:
        break
    if not pending:
        pending = framed
    try:
        n = s.send(pending)
        sent += n
        pending = pending[n:]
    except BlockingIOError:
        time.sleep(0.001)
    except OSError:
        break
s.setblocking(True)
s.settimeout(20)
try:
    while b"\r\n\r\n" not in answer:
        data = s.recv(65536)
        if not data:
            break
        answer += data
except OSError:
    pass
status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
print(json.dumps({"status": status, "sent": sent, "head": answer[:300].decode(errors="replace")}))
'''

PYTHON = sys.executable
