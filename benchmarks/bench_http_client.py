"""Benchmark: one webhook POST with each HTTP client stack, same uvicorn app, same Unix socket.

Why the bridge's webhook client is its own kept-alive connections with httptools as the parser
(bridge/webhooks/client.py, http1.py): this POSTs the real CreateContainer envelope (4 KB) to
the bare Starlette benchmark policy (bench_webhook.py) on uvicorn, one request in flight, with
- `bridge`: the bridge's PolicyClient (asyncio transport, llhttp via httptools);
- `aiohttp`: an aiohttp ClientSession set up as the bridge's client was until issue 12
  (UnixConnector, no cookie jar, no decompression; llhttp in C as well);
- `httpx`: httpx.AsyncClient with its default transport (httpcore, h11 in pure Python, anyio).
It prints the round trip percentiles and this process's CPU per request for each.

    .venv/bin/python benchmarks/bench_http_client.py --requests 3000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import aiohttp  # noqa: E402
import httpx  # noqa: E402

from bridge.contract.request_body import PayloadBuilder, envelope  # noqa: E402
from bridge.proto.nri import api_pb2 as api  # noqa: E402
from bridge.simulator.bench import LatencyStats  # noqa: E402
from bridge.simulator.synthetic import template  # noqa: E402
from bridge.webhooks.client import PolicyClient  # noqa: E402
from bridge.webhooks.specs import parse_webhooks  # noqa: E402
from tests.waiting import accepts, wait_until  # noqa: E402


def body() -> bytes:
    pod, container = template()
    request = api.CreateContainerRequest(pod=pod, container=container)
    payload = PayloadBuilder().event("CreateContainer", request)
    runtime = b'{"name":"containerd","version":"2.1.9"}'
    return envelope("CreateContainer", "bench", runtime, 1000, False, payload)


def show(stats: LatencyStats) -> str:
    us = stats.to_us()
    return f"p50 {us['p50']:.0f} µs, p90 {us['p90']:.0f} µs, p99 {us['p99']:.0f} µs"


async def measure(post: Callable[[], Awaitable[object]], n: int, warmup: int,
                  ) -> tuple[LatencyStats, float]:
    for _ in range(warmup):
        await post()
    samples = []
    cpu = os.times()
    for _ in range(n):
        started = time.perf_counter()
        await post()
        samples.append(time.perf_counter() - started)
    used = (os.times().user - cpu.user) + (os.times().system - cpu.system)
    return LatencyStats.of(samples), used / n


async def run(sock: Path, n: int, warmup: int) -> None:
    data = body()
    spec = parse_webhooks([{"name": "bench", "url": f"unix://{sock}/v1/policy"}])[0]
    client = PolicyClient(spec)
    stats, cpu = await measure(lambda: client.post(data, 1.0), n, warmup)
    await client.aclose()
    print(f"bridge (PolicyClient, httptools): {show(stats)}; client CPU {cpu * 1e6:.0f} µs/request")
    async with aiohttp.ClientSession(
            connector=aiohttp.UnixConnector(path=str(sock)), auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None), cookie_jar=aiohttp.DummyCookieJar(),
            headers={"Content-Type": "application/json", "Accept": "application/json"}) as ah:
        async def post_aiohttp() -> object:
            async with asyncio.timeout(1.0), ah.post("http://localhost/v1/policy", data=data,
                                                     allow_redirects=False) as response:
                return json.loads(await response.read())
        stats, cpu = await measure(post_aiohttp, n, warmup)
    print(f"aiohttp (ClientSession): {show(stats)}; client CPU {cpu * 1e6:.0f} µs/request")
    transport = httpx.AsyncHTTPTransport(uds=str(sock))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as hx:
        async def post() -> object:
            response = await hx.post("/v1/policy", content=data,
                                     headers={"content-type": "application/json"})
            return response.json()
        stats, cpu = await measure(post, n, warmup)
    print(f"httpx (default transport): {show(stats)}; client CPU {cpu * 1e6:.0f} µs/request")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="nwb-client-", dir="/tmp"))
    sock = workdir / "policy.sock"
    server = subprocess.Popen(
        [sys.executable, str(REPO / "benchmarks" / "bench_webhook.py"), "--serve-policy",
         str(sock), "--policy-app", "starlette"], cwd=REPO)
    try:
        wait_until(accepts(sock), what=f"{sock} accepts connections", timeout_s=15.0)
        asyncio.run(run(sock, args.requests, args.warmup))
    finally:
        server.terminate()  # by PID: only the process we started
        server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
