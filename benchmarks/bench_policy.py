"""Benchmark the koordinator-qos decision for a CreateContainer.

1. in-process: ``Engine.evaluate`` on the request's ``Event``, parsed once beforehand, so the
   decision alone (node view fold -> every enabled hook -> merge -> Decision); target p50 <=
   100 us (2. includes the request path);
2. in-process, the whole webhook route (``hot_route.evaluate_body``: request bytes -> the one
   request decoder -> decision -> the one reply encoder) on the bridge benchmark's
   CreateContainer body and the LSR pinned request;
3. over HTTP on a Unix socket against a real uvicorn running ``nri-policy-server`` in its own
   process (the request decoded, the reply encoded once, JSON both ways),
   measured with a keep-alive client; target p50 <= 1 ms.

Run: ``.venv/bin/python benchmarks/bench_policy.py [--iterations N] [--no-http]``. Prints
min/p50/p90/p99.
uvicorn picks httptools/uvloop up if they are importable (e.g. via ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridge.contract.request_body import encode, envelope, event_payload  # noqa: E402
from bridge.proto.nri import api_pb2 as api  # noqa: E402
from bridge.simulator.synthetic import template  # noqa: E402
from policy_server.engine.request import parse_request  # noqa: E402
from policy_server.http_edge.hot_route import evaluate_body  # noqa: E402
from policy_server.service import PolicyServer, ServerOptions  # noqa: E402

RULES = ROOT / "examples" / "koordinator-rules.yaml"
REQUESTS = {
    "LSR pinned": ROOT / "examples/requests/koord-create-lsr-pinned.json",
    "BE batch": ROOT / "examples/requests/koord-create-be-batch.json",
    "GPU HAMi-core": ROOT / "examples/requests/koord-create-gpu-hami.json",
}
URL = "/v1/policies/koordinator-qos"


def stats(label: str, samples_s: list[float], unit: str = "us") -> dict[str, float]:
    scale = 1e6 if unit == "us" else 1e3
    ordered = sorted(s * scale for s in samples_s)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    out = {"min": ordered[0], "p50": statistics.median(ordered), "p90": pct(90), "p99": pct(99)}
    print(
        f"  {label:<34} min {out['min']:8.1f} {unit}  p50 {out['p50']:8.1f} {unit}  "
        f"p90 {out['p90']:8.1f} {unit}  p99 {out['p99']:8.1f} {unit}  (n={len(ordered)})"
    )
    return out


def bench_in_process(iterations: int) -> dict[str, dict[str, float]]:
    server = PolicyServer(ServerOptions(rules_path=RULES))
    engine = server.engine
    print(f"in-process Engine.evaluate on a parsed Event, rules {RULES.name}:")
    results = {}
    for label, path in REQUESTS.items():
        event = parse_request(orjson.dumps(json.loads(path.read_text())))
        for _ in range(500):
            engine.evaluate("koordinator-qos", event)
        samples = []
        clock = time.perf_counter
        for _ in range(iterations):
            start = clock()
            engine.evaluate("koordinator-qos", event)
            samples.append(clock() - start)
        results[label] = stats(label, samples)
    return results


def bench_body() -> bytes:
    """The 4.2 KB CreateContainer body benchmarks/bench_webhook.py sends (the bridge's
    request encoder, bridge.contract.request_body)."""
    pod, ctr = template()
    payload = event_payload("CreateContainer", api.CreateContainerRequest(pod=pod, container=ctr))
    runtime = encode({"name": "containerd", "version": "2.1.9"})
    return envelope("CreateContainer", "u-1", runtime, 1900, False, payload)


def bench_route(iterations: int) -> dict[str, dict[str, float]]:
    server = PolicyServer(ServerOptions(rules_path=RULES))
    bodies = {"bench CreateContainer": bench_body(),
              "LSR pinned": orjson.dumps(json.loads(REQUESTS["LSR pinned"].read_text()))}
    routes = {"one request path": evaluate_body}
    sizes = ", ".join(f"{label} {len(raw)} B" for label, raw in bodies.items())
    print(f"in-process webhook route, request bytes -> reply bytes (koordinator-qos; {sizes}):")
    results = {}
    for label, raw in bodies.items():
        samples: dict[str, list[float]] = {name: [] for name in routes}
        clock = time.perf_counter
        for i in range(iterations + 500):
            for name, route in routes.items():
                coro = route(server, "koordinator-qos", raw)
                start = clock()
                try:  # nothing in it suspends (no node effects for CreateContainer)
                    coro.send(None)
                except StopIteration as done:
                    assert done.value[0] == 200, done.value
                else:
                    raise SystemExit("the route suspended")
                if i >= 500:  # warm-up
                    samples[name].append(clock() - start)
        for name in routes:
            results[f"{label}, {name}"] = stats(f"{label}, {name}", samples[name])
    return results


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket: the lightest keep-alive client in the stdlib."""

    def __init__(self, path: str) -> None:
        super().__init__("policy")
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def wait_for_socket(path: Path, proc: subprocess.Popen[bytes], timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        if path.exists():
            try:
                with httpx.Client(transport=httpx.HTTPTransport(uds=str(path))) as c:
                    if c.get("http://p/healthz").status_code == 200:
                        return
            except httpx.TransportError:
                pass
        time.sleep(0.05)
    raise SystemExit("server did not start")


def bench_http(iterations: int) -> dict[str, dict[str, float]]:
    body = REQUESTS["BE batch"].read_bytes()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        sock = Path(tmp) / "policy.sock"
        proc = subprocess.Popen(
            [sys.executable, "-m", "policy_server.main", "--uds", str(sock), "--rules", str(RULES),
             "--log-level", "warning"],
            cwd=ROOT,
            env={**os.environ,
                 "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                             os.environ.get("PYTHONPATH")]))},
        )
        try:
            wait_for_socket(sock, proc)
            print("HTTP over a Unix socket, uvicorn in its own process, BE batch CreateContainer:")
            conn = UnixHTTPConnection(str(sock))
            headers = {"content-type": "application/json"}

            def once_stdlib() -> Any:
                conn.request("POST", URL, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                assert response.status == 200, data
                return data

            results["http.client"] = _timed("http.client (stdlib) keep-alive", once_stdlib,
                                            iterations)
            transport = httpx.HTTPTransport(uds=str(sock))
            with httpx.Client(transport=transport, base_url="http://policy") as client:

                def once_httpx() -> Any:
                    response = client.post(URL, content=body, headers=headers)
                    assert response.status_code == 200, response.text
                    return response

                results["httpx"] = _timed("httpx keep-alive", once_httpx, iterations)
            conn.close()
        finally:
            proc.terminate()
            proc.wait(10)
    return results


def _timed(label: str, call: Any, iterations: int) -> dict[str, float]:
    for _ in range(200):
        call()
    samples = []
    clock = time.perf_counter
    for _ in range(iterations):
        start = clock()
        call()
        samples.append(clock() - start)
    return stats(label, samples, unit="us")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20000,
                        help="in-process iterations (HTTP uses a fifth)")
    parser.add_argument("--no-http", action="store_true",
                        help="in-process only (no server process)")
    args = parser.parse_args()
    in_process = bench_in_process(args.iterations)
    bench_route(args.iterations)
    http_results = {} if args.no_http else bench_http(max(args.iterations // 5, 100))
    print("targets (p50):")
    for label, result in in_process.items():
        print(f"  in-process {label:<28} <= 100 us: {_verdict(result['p50'], 100)}")
    for label, result in http_results.items():
        print(f"  HTTP/UDS, {label:<29} <= 1000 us: {_verdict(result['p50'], 1000)}")
    return 0


def _verdict(p50: float, target: float) -> str:
    return f"{'met' if p50 <= target else 'MISSED'} ({p50:.1f} us)"


if __name__ == "__main__":
    sys.exit(main())
