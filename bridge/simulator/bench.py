"""Bench mode: N CreateContainer round trips through the connected plugins.

The pod and container come from the recorded containerd 2.1.9 lifecycle (a
realistic ~3 KiB request); each event gets a unique container id. Latency is
measured twice: the plugin round trip (request written -> response read,
what the bridge is responsible for) and the whole runtime-side operation
(adds the simulator's request building, merge and apply).
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
class LatencyStats:
    min_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    max_s: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> LatencyStats:
        values = sorted(samples)
        if not values:
            return cls(0.0, 0.0, 0.0, 0.0, 0.0)
        return cls(values[0], percentile(values, 50), percentile(values, 90),
                   percentile(values, 99), values[-1])

    def to_us(self) -> dict[str, float]:
        return {name: round(getattr(self, f"{name}_s") * 1e6, 1)
                for name in ("min", "p50", "p90", "p99", "max")}


@dataclass(frozen=True, slots=True)
class BenchResult:
    """`round_trip`: request written -> response read, per event (the plugin's share);
    `operation`: the whole runtime-side CreateContainer (adds request building,
    merge and apply in the simulator)."""

    events: int
    errors: int
    concurrency: int
    duration_s: float
    round_trip: LatencyStats
    operation: LatencyStats

    @property
    def p50_s(self) -> float:
        return self.round_trip.p50_s

    @property
    def p99_s(self) -> float:
        return self.round_trip.p99_s

    @property
    def events_per_s(self) -> float:
        return self.events / self.duration_s if self.duration_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": self.events, "errors": self.errors, "concurrency": self.concurrency,
            "duration_s": round(self.duration_s, 4), "events_per_s": round(self.events_per_s, 1),
            "latency_us": self.round_trip.to_us(), "operation_us": self.operation.to_us(),
        }

    def format(self) -> str:
        rt, op = self.round_trip.to_us(), self.operation.to_us()
        return (f"CreateContainer x{self.events} (concurrency {self.concurrency}, "
                f"{self.errors} errors), {self.events_per_s:.0f} events/s\n"
                f"  round trip: min {rt['min']:.0f} µs, p50 {rt['p50']:.0f} µs, "
                f"p90 {rt['p90']:.0f} µs, p99 {rt['p99']:.0f} µs, max {rt['max']:.0f} µs\n"
                f"  operation:  min {op['min']:.0f} µs, p50 {op['p50']:.0f} µs, "
                f"p90 {op['p90']:.0f} µs, p99 {op['p99']:.0f} µs, max {op['max']:.0f} µs")


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending sequence."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(pct / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


async def run_bench(runtime: SimulatedRuntime, n: int, concurrency: int = 1, *,
                    warmup: int = 0, pod: api.PodSandbox | None = None) -> BenchResult:
    """Send `warmup` unmeasured, then `n` measured CreateContainer events (in the recorded
    template pod, or in `pod`)."""
    if n < 1 or concurrency < 1:
        raise ValueError("n and concurrency must be >= 1")
    recorded, container = template()
    pod = pod if pod is not None else recorded
    prefix = container.id[:40]
    latencies: list[float] = []
    round_trips: list[float] = []
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
                round_trips.append(result.rpc_s)
                errors += result.error is not None

    await worker(iter(range(warmup)), record=False)
    numbers = iter(range(warmup, warmup + n))
    started = time.perf_counter()
    await asyncio.gather(*(worker(numbers, True) for _ in range(concurrency)))
    duration = time.perf_counter() - started
    return BenchResult(events=len(latencies), errors=errors, concurrency=concurrency,
                       duration_s=duration, round_trip=LatencyStats.of(round_trips),
                       operation=LatencyStats.of(latencies))
