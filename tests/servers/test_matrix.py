"""The conformance matrix: the bridge's HTTP client against the real servers policy authors
pick, each with its default settings and with a short idle timeout, over a Unix socket and
over TCP; events at random intervals that straddle the server's idle timeout; zero failures.
Then what servers do to a connection: chunked replies, Connection: close, 1xx before the
reply, and a server configured to close after every reply.

The servers and their versions are listed in docs/webhooks.md ("Servers we test against").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.servers.harness import Run, appears, drive, listener, ready, running
from tests.servers.kinds import KINDS, Kind
from tests.servers.nginx_front import nginx

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]


@asynccontextmanager
async def serving(kind: Kind, transport: str, tmp: Path, idle: float | None,
                  close_always: bool = False) -> AsyncIterator[str]:
    """The kind's server up and answering; its base URL over `transport`."""
    if kind.argv is None:
        with nginx(tmp, idle, close_always) as (proc, urls):
            await appears(tmp / "nginx.pid", proc, tmp / "nginx.log")
            await ready(urls[transport] + "/v1/policy")
            yield urls[transport]
        return
    lis = listener(transport, tmp)
    with running(kind.argv(lis.sock.fileno(), idle, close_always), lis.sock, tmp / "server.log"):
        lis.sock.close()  # the server's copy is the one that listens
        await ready(lis.base_url + "/v1/policy")
        yield lis.base_url


def check(run: Run, events: int) -> None:
    assert run.events == events
    assert run.failures == [], f"{len(run.failures)} of {events} events failed: {run.failures[:5]}"
    assert run.wrong == []


def plan(idle: float | None) -> tuple[int, int, tuple[float, float]]:
    """(clients, events each, gap range): gaps straddle the idle timeout where that takes
    seconds, else plain reuse over a couple of seconds (the server keeps the connection)."""
    if idle is None or idle > 5.0:
        return 8, 5, (0.0, 0.5)
    if idle >= 1.0:  # whole seconds: many clients side by side, few events each
        return 24, 2, (0.6 * idle, 1.4 * idle)
    return 4, 50, (0.0, 2 * idle)


@pytest.mark.parametrize("kind", KINDS, ids=str)
async def test_default_settings(kind: Kind, tmp_path: Path) -> None:
    clients, events, gaps = plan(kind.default_idle_s)
    async with serving(kind, "unix", tmp_path, None) as base:
        run = await drive(base + "/v1/policy", clients=clients, events=events, gap_s=gaps,
                          seed=1)
    check(run, clients * events)


@pytest.mark.parametrize("transport", ["unix", "tcp"])
@pytest.mark.parametrize("kind", KINDS, ids=str)
async def test_short_idle_timeout(kind: Kind, transport: str, tmp_path: Path) -> None:
    clients, events, gaps = plan(kind.short_idle_s)
    async with serving(kind, transport, tmp_path, kind.short_idle_s) as base:
        run = await drive(base + "/v1/policy", clients=clients, events=events, gap_s=gaps,
                          seed=2)
    check(run, clients * events)


@pytest.mark.parametrize("kind", KINDS, ids=str)
async def test_reply_framings(kind: Kind, tmp_path: Path) -> None:
    routes = ["/chunked", "/close"] + (["/interim"] if kind.interim else [])
    async with serving(kind, "unix", tmp_path, None) as base:
        for route in routes:
            run = await drive(base + route, clients=2, events=10, gap_s=(0.0, 0.01), seed=3)
            check(run, 20)


@pytest.mark.parametrize("kind", KINDS, ids=str)
async def test_server_that_closes_after_every_reply(kind: Kind, tmp_path: Path) -> None:
    async with serving(kind, "unix", tmp_path, None, close_always=True) as base:
        run = await drive(base + "/v1/policy", clients=2, events=20, gap_s=(0.0, 0.01),
                          seed=4)
    check(run, 40)
