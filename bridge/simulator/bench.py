"""Bench mode: N CreateContainer round trips through the connected plugins.

The pod and container come from the recorded containerd 2.1.9 lifecycle (a
realistic ~3 KiB request); each event gets a unique container id. Latency is
measured around the whole runtime-side operation (request encode, plugin
round trip, merge, apply), which is what a CRI call waits for.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.proto.nri import api_pb2 as api
from bridge.simulator.runtime import SimulatedRuntime
from bridge.simulator.synthetic import template


@dataclass(frozen=True, slots=True)
class BenchResult:
    events: int
    errors: int
    concurrency: int
    duration_s: float
    min_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    max_s: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.duration_s if self.duration_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": self.events, "errors": self.errors, "concurrency": self.concurrency,
            "duration_s": round(self.duration_s, 4), "events_per_s": round(self.events_per_s, 1),
            "latency_us": {name: round(getattr(self, f"{name}_s") * 1e6, 1)
                           for name in ("min", "p50", "p90", "p99", "max")},
        }

    def format(self) -> str:
        us = self.to_dict()["latency_us"]
        return (f"CreateContainer x{self.events} (concurrency {self.concurrency}, "
                f"{self.errors} errors): min {us['min']:.0f} µs, p50 {us['p50']:.0f} µs, "
                f"p90 {us['p90']:.0f} µs, p99 {us['p99']:.0f} µs, max {us['max']:.0f} µs; "
                f"{self.events_per_s:.0f} events/s")


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending sequence."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(pct / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


async def run_bench(runtime: SimulatedRuntime, n: int, concurrency: int = 1, *,
                    warmup: int = 0) -> BenchResult:
    """Send `warmup` unmeasured, then `n` measured CreateContainer events."""
    if n < 1 or concurrency < 1:
        raise ValueError("n and concurrency must be >= 1")
    pod, container = template()
    prefix = container.id[:40]
    latencies: list[float] = []
    errors = 0

    async def worker(numbers: Iterator[int], record: bool) -> None:
        nonlocal errors
        ctr = api.Container()
        ctr.CopyFrom(container)
        for i in numbers:  # shared iterator: workers take the next id in turn
            ctr.id = f"{prefix}{i:024x}"
            started = time.perf_counter()
            result = await runtime.create_container(pod, ctr)
            elapsed = time.perf_counter() - started
            runtime.state.containers.pop(ctr.id, None)  # keep the runtime's state steady
            if record:
                latencies.append(elapsed)
                errors += result.error is not None

    await worker(iter(range(warmup)), record=False)
    numbers = iter(range(warmup, warmup + n))
    started = time.perf_counter()
    await asyncio.gather(*(worker(numbers, True) for _ in range(concurrency)))
    duration = time.perf_counter() - started
    values = sorted(latencies)
    return BenchResult(
        events=len(values), errors=errors, concurrency=concurrency, duration_s=duration,
        min_s=values[0], p50_s=percentile(values, 50), p90_s=percentile(values, 90),
        p99_s=percentile(values, 99), max_s=values[-1],
    )

