"""Issue 43, bounded listeners: floods the attacker uid can send, against the real processes.

Each flood is bounded in count and time and stays on loopback. On the main branch before this
work no listener had a header timeout (slow connections stayed open for good), the metrics
ports held every idle connection, and the policy server buffered any body it was sent (two
300 MiB bodies took it to 830 MB; the DaemonSet limit is 192Mi).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.hardening.processes import peak_rss_kb, rss_kb
from tests.security.attacker import Attacker
from tests.security.listener_rig import (
    BIG_BODY,
    FLOOD,
    SHIPPED_LIMIT_KB,
    free_port,
    report,
    running_bridge,
    running_policy_server,
)
from tests.waiting import until

pytestmark = pytest.mark.processes  # starts processes: not in make check

SLOW_HEAD = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
HEADER_TIMEOUT_S = 2


def _flood(evil: Attacker, address: str, count: int, prefix: str, drip: str,
           seconds: float) -> dict[str, int | float | None]:
    done = evil.run(FLOOD, address, str(count), prefix, drip, "0.5", str(seconds),
                    timeout_s=seconds + 120)
    assert done.returncode == 0, done.stderr
    result: dict[str, int | float | None] = report(done.stdout)
    return result


def _token(workdir: Path) -> Path:
    token = workdir / "token"
    token.write_text("flood-token-" + "q" * 24)
    return token


async def test_slowloris_on_the_control_address_is_closed_by_the_header_timeout(
        evil: Attacker, workdir: Path) -> None:
    port = free_port()
    config = {"control": {"socket": str(workdir / "control.sock"),
                          "header_timeout_s": HEADER_TIMEOUT_S, "max_connections": 1024}}
    async with running_bridge(workdir, config=config, extra=[
            "--control-address", f"127.0.0.1:{port}",
            "--control-bearer-token-file", str(_token(workdir))]) as (bridge, _):
        result = await asyncio.to_thread(_flood, evil, f"127.0.0.1:{port}", 300, SLOW_HEAD,
                                         "x", 40)
        rss = rss_kb(bridge.pid)
    # Every slow connection is closed, each within the timeout plus a generous margin for a
    # busy machine (they would stay open for the whole 40 s without it).
    assert result["opened"] == 300 and result["closed"] == 300, result
    last = result["last_close_s"]
    assert last is not None and last < HEADER_TIMEOUT_S + 20, result
    assert rss < SHIPPED_LIMIT_KB


async def test_slowloris_on_the_policy_server_is_closed_by_the_header_timeout(
        evil: Attacker, workdir: Path) -> None:
    port = free_port()
    async with running_policy_server(
            workdir, "--host", "127.0.0.1", "--port", str(port), "--bearer-token-file",
            str(_token(workdir)), "--header-timeout", str(HEADER_TIMEOUT_S),
            "--max-connections", "1024", port=port) as process:
        result = await asyncio.to_thread(_flood, evil, f"127.0.0.1:{port}", 300, SLOW_HEAD,
                                         "x", 40)
        rss = rss_kb(process.pid)
    assert result["opened"] == 300 and result["closed"] == 300, result
    last = result["last_close_s"]
    assert last is not None and last < HEADER_TIMEOUT_S + 20, result
    assert rss < SHIPPED_LIMIT_KB


async def test_idle_connections_to_the_metrics_ports_are_capped(
        evil: Attacker, workdir: Path) -> None:
    bridge_port, policy_port = free_port(), free_port()
    sock = workdir / "policy.sock"
    async with running_bridge(workdir, extra=["--metrics-address",
                                              f"127.0.0.1:{bridge_port}"]) as (bridge, _), \
            running_policy_server(workdir, "--uds", str(sock), "--metrics-address",
                                  f"127.0.0.1:{policy_port}", sock=sock) as policy:
        results = {}
        for name, port in (("bridge", bridge_port), ("policy", policy_port)):
            results[name] = await asyncio.to_thread(_flood, evil, f"127.0.0.1:{port}", 2000,
                                                    "", "", 4)
        rss = {"bridge": rss_kb(bridge.pid), "policy": rss_kb(policy.pid)}
        async with httpx.AsyncClient(timeout=10) as client:  # still answering afterwards
            scraped = [(await client.get(f"http://127.0.0.1:{p}/metrics")).status_code
                       for p in (bridge_port, policy_port)]
    for name, result in results.items():
        held = int(result["opened"] or 0) - int(result["closed"] or 0)
        # 64 held by the cap, plus what the kernel's accept queue still holds unaccepted.
        assert held <= 64 + 128, (name, result)
        assert rss[name] < SHIPPED_LIMIT_KB, (name, rss)
    assert scraped == [200, 200]


async def test_the_unix_healthz_answers_during_a_tcp_flood(evil: Attacker,
                                                          workdir: Path) -> None:
    port = free_port()
    async with running_bridge(workdir, extra=[
            "--control-address", f"127.0.0.1:{port}",
            "--control-bearer-token-file", str(_token(workdir))]) as (bridge, _):
        flood = asyncio.create_task(asyncio.to_thread(
            _flood, evil, f"127.0.0.1:{port}", 3000, SLOW_HEAD, "x", 12))
        transport = httpx.AsyncHTTPTransport(uds=str(bridge.control_sock))
        answers: list[int] = []
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost",
                                     timeout=5) as client:
            async def probe() -> bool:  # the liveness probe, every 0.2 s until the flood ends
                try:
                    answers.append((await client.get("/healthz")).status_code)
                except httpx.HTTPError:
                    answers.append(0)
                return flood.done()

            await until(probe, what="the flood is over", timeout_s=180, interval_s=0.2)
        result = await flood
        rss = rss_kb(bridge.pid)
    assert result["opened"] == 3000, result
    assert len(answers) >= 10 and set(answers) == {200}, answers
    assert rss < SHIPPED_LIMIT_KB


async def test_a_300_mib_body_is_refused_before_it_is_read(evil: Attacker,
                                                          workdir: Path) -> None:
    port = free_port()
    huge = 300 << 20
    async with running_policy_server(workdir, "--host", "127.0.0.1", "--port", str(port),
                                     "--insecure", port=port) as process:
        started = time.monotonic()
        declared = await asyncio.gather(*(asyncio.to_thread(
            evil.run, BIG_BODY, "127.0.0.1", str(port), "/v1/policies/bench", str(huge),
            str(huge)) for _ in range(2)))
        chunked = await asyncio.to_thread(evil.run, BIG_BODY, "127.0.0.1", str(port),
                                          "/v1/policies/bench", "0", str(huge))
        elapsed = time.monotonic() - started
        peak = peak_rss_kb(process.pid)
    for done in (*declared, chunked):
        assert done.returncode == 0, done.stderr
    answers = [report(d.stdout) for d in (*declared, chunked)]
    assert [a["status"] for a in answers] == [413, 413, 413], answers
    # Declared too large: answered before the body (the kernel's buffers take a few MiB);
    # chunked: cut at the 32 MiB limit, far from 300.
    assert all(a["sent"] < 16 << 20 for a in answers[:2]), answers
    assert answers[2]["sent"] < 100 << 20, answers
    assert peak < SHIPPED_LIMIT_KB, peak
    assert elapsed < 120


async def test_a_300_mib_body_over_the_policy_socket_is_refused_too(workdir: Path) -> None:
    # Root's own connection (allowed on the socket): the limit is the listener's, whoever sends.
    sock = workdir / "policy.sock"
    huge = 300 << 20
    async with running_policy_server(workdir, "--uds", str(sock), sock=sock) as process:
        done = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-I", "-c", BIG_BODY, f"unix:{sock}", "0",
                             "/v1/policies/bench", str(huge), str(huge)],
            capture_output=True, text=True, timeout=180, check=False)
        peak = peak_rss_kb(process.pid)
    assert done.returncode == 0, done.stderr
    answer = report(done.stdout)
    assert answer["status"] == 413 and answer["sent"] < 16 << 20, answer
    assert peak < SHIPPED_LIMIT_KB, peak


async def test_slow_connections_to_the_metrics_ports_are_closed_by_the_header_timeout(
        evil: Attacker, workdir: Path) -> None:
    # Fewer than the metrics cap (64), at the default 10 s header timeout.
    bridge_port, policy_port = free_port(), free_port()
    sock = workdir / "policy.sock"
    async with running_bridge(workdir, extra=["--metrics-address",
                                              f"127.0.0.1:{bridge_port}"]), \
            running_policy_server(workdir, "--uds", str(sock), "--metrics-address",
                                  f"127.0.0.1:{policy_port}", sock=sock):
        results = await asyncio.gather(*(asyncio.to_thread(
            _flood, evil, f"127.0.0.1:{port}", 50, SLOW_HEAD, "x", 45)
            for port in (bridge_port, policy_port)))
    for result in results:
        assert result["opened"] == 50 and result["closed"] == 50, results
        last = result["last_close_s"]
        assert last is not None and last < 10 + 25, results
