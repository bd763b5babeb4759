"""Starting a policy server of any kind on a socket the test owns, and driving events at it.

The test binds the listening socket (a Unix socket in its temp dir, or TCP on 127.0.0.1 port
0) and hands it to the server process as an inherited file descriptor, so no address is ever
shared with a parallel run and nothing has to be polled for: a connection made before the
server accepts waits in the socket's backlog. Servers that cannot take a descriptor (nginx)
bind their own addresses under the test's temp dir.

The driver is the bridge's own HTTP client (`PolicyClient`), several of them side by side
(one kept-alive connection each), each sending events one after another at random intervals
from a seeded generator: the intervals straddle the server's idle timeout, so some requests
reuse a connection the server still keeps, some find it closed, and some race its close.

Owns: process start/stop by PID, the listening sockets, the driver. Must not: know any one
server's settings (python_policy.py, node_policy.js, gopolicy/, nginx_front.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.webhooks.client import PolicyClient
from bridge.webhooks.failures import WebhookFailure
from bridge.webhooks.specs import parse_webhooks
from tests.waiting import log_tail, path_exists, until

ROOT = Path(__file__).resolve().parents[2]
REQUEST = (ROOT / "examples" / "requests" / "label-env-create.json").read_bytes()
EXPECTED = {"adjust": {"env": [{"key": "TEAM", "value": "payments"}]}}
START_CEILING_S = 60.0  # only catches a server that never comes up
BUDGET_S = 2.0  # per event; generous: a busy 2-core CI machine


@dataclass
class Listener:
    sock: socket.socket
    base_url: str  # unix:///path or http://127.0.0.1:port


def listener(transport: str, tmp: Path) -> Listener:
    if transport == "unix":
        path = tmp / "policy.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        sock.listen(128)
        return Listener(sock, f"unix://{path}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return Listener(sock, f"http://127.0.0.1:{sock.getsockname()[1]}")


@contextmanager
def running(argv: Sequence[str], inherit: socket.socket | None, log: Path,
            env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """The server process; stopped (SIGTERM, then SIGKILL) by its PID on leaving."""
    fds = (inherit.fileno(),) if inherit is not None else ()
    with log.open("wb") as out:
        proc = subprocess.Popen(list(argv), pass_fds=fds, stdout=out, stderr=subprocess.STDOUT,
                                cwd=ROOT, env={**os.environ, **(env or {})},
                                start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the group: gunicorn's workers, nginx's
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def client(url: str) -> PolicyClient:
    return PolicyClient(parse_webhooks([{"name": "p", "url": url,
                                         "events": ["CreateContainer"]}])[0])


@dataclass
class Run:
    events: int = 0
    failures: list[str] = field(default_factory=list)
    wrong: list[Any] = field(default_factory=list)
    retries: int = 0


async def ready(url: str) -> None:
    """One answered request: the server is up (the first connection may wait in the backlog)."""
    c = client(url)
    try:
        assert json.loads(await c.post_raw(REQUEST, START_CEILING_S)) == EXPECTED
    finally:
        await c.aclose()


async def drive(url: str, *, clients: int, events: int, gap_s: tuple[float, float],
                seed: int) -> Run:
    """`clients` clients side by side, `events` each, gaps drawn uniformly from gap_s."""
    run = Run()
    rng = random.Random(seed)
    gaps = [[rng.uniform(*gap_s) for _ in range(events)] for _ in range(clients)]

    async def one(my_gaps: list[float]) -> None:
        c = client(url)
        try:
            for gap in my_gaps:
                await asyncio.sleep(gap)  # the workload's shape, not a wait for an event
                run.events += 1
                try:
                    reply = json.loads(await c.post_raw(REQUEST, BUDGET_S))
                except WebhookFailure as failure:
                    run.failures.append(f"{failure.kind.value}: {failure.reason}")
                    continue
                if reply != EXPECTED:
                    run.wrong.append(reply)
            run.retries += c.retries
        finally:
            await c.aclose()

    async with asyncio.TaskGroup() as tg:
        for my_gaps in gaps:
            tg.create_task(one(my_gaps))
    return run


async def appears(path: Path, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until `path` exists (a server writes it once it listens); fail if it exits."""
    await until(path_exists(path), what=f"{path} appears", timeout_s=START_CEILING_S,
                interval_s=0.01, proc=proc, details=log_tail(log))
