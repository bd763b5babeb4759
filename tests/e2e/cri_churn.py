"""CRI churn beside back-to-back unsolicited updates, and a watch for calls that do not return.

Issue 32: containerd takes its NRI locks in two orders. Every CRI call with an NRI event, and
the exit of a container (``NotifyContainerExit``), holds containerd's own NRI mutex (``local``)
and then waits for the NRI ``Adaptation`` mutex; a plugin's ``UpdateContainers`` holds the
``Adaptation`` mutex and then waits for ``local`` (containerd 1.7.24 ``pkg/nri/nri.go``,
2.1.9 ``internal/nri/nri.go``, ``updateFromPlugin``). The more of both are waiting at once,
the sooner the two meet in the middle; so this keeps several CRI workers busy, lets
containers exit on their own, and keeps the bridge's UpdateContainers queue non-empty.

Owns: the worker threads (pod life cycles, an exclusive-CPU life cycle for the cpu-pools
push, POST /v1/updates loops on the bridge's control socket), the table of calls in flight
that tells a call that has not returned, and the counts a report quotes.

Must not: start, stop or signal processes, or decide pass or fail (the test does both).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import httpx

from .cri import CriClient, Pod
from .procs import scaled

T = TypeVar("T")

# A call still in flight after this did not return: CRI calls here take well under a second,
# an NRI event at most containerd's plugin timeout (2 s); the ceiling leaves room for a busy
# 2-core machine.
HANG_S = scaled(20.0)
WATCH_INTERVAL_S = 0.2
JOIN_TIMEOUT_S = scaled(60.0)
# Above the bridge's own bound on an update (bridge.control.api.SEND_TIMEOUT_S, 35 s).
UPDATE_HTTP_TIMEOUT_S = scaled(45.0)
UPDATE_RETRY_S = 0.1  # after an error answer, so a disconnected bridge is not polled hot
EXIT_POLL_S = 0.05
UPDATE_SHARES = (512, 1024)  # alternated, so every update changes the cgroup
CHURN_SHARES = 768
# Exits at once: containerd's exit path (NotifyContainerExit -> stopContainer) runs.
QUICK_COMMAND = ["/bin/true"]
POST_UPDATES = "POST /v1/updates"


@dataclass(frozen=True, slots=True)
class Call:
    worker: str
    name: str
    started_s: float  # seconds into the churn
    age_s: float

    def __str__(self) -> str:
        return (f"{self.name} ({self.worker}), started {self.started_s:.1f} s into the churn, "
                f"{self.age_s:.1f} s without an answer")


@dataclass
class Tally:
    """What the workers did; written under ``lock`` by every thread."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    cri_calls: int = 0
    pod_cycles: int = 0
    exclusive_cycles: int = 0
    updates_sent: int = 0
    updates_failed: int = 0  # the runtime answered "failed" for them
    update_errors: int = 0  # the bridge refused or did not answer the POST
    errors: list[str] = field(default_factory=list)  # CRI calls that failed
    # Round trips of the POST /v1/updates that succeeded: how long an update takes to be
    # applied by the runtime (the bridge answers once the runtime did), under the churn.
    update_s: list[float] = field(default_factory=list)


class InFlight:
    """The one call each worker thread is waiting for, and since when."""

    def __init__(self, origin: float) -> None:
        self._origin = origin
        self._lock = threading.Lock()
        self._calls: dict[str, tuple[str, float]] = {}

    @contextlib.contextmanager
    def call(self, worker: str, name: str) -> Iterator[None]:
        with self._lock:
            self._calls[worker] = (name, time.monotonic())
        try:
            yield
        finally:
            with self._lock:
                del self._calls[worker]

    def now(self) -> list[Call]:
        at = time.monotonic()
        with self._lock:
            calls = list(self._calls.items())
        return sorted((Call(w, name, t - self._origin, at - t) for w, (name, t) in calls),
                      key=lambda c: -c.age_s)


class Churn:
    """Worker threads against one containerd and one bridge; ``run`` watches them."""

    def __init__(self, cri: CriClient, control_socket: Path, steady: Sequence[str],
                 exclusive_resources: dict[str, Any]) -> None:
        self.cri = cri
        self.control_socket = control_socket
        self.steady = list(steady)  # long-running containers the updates go to
        self.exclusive_resources = exclusive_resources
        self.tally = Tally()
        self.stop = threading.Event()
        self.hung = threading.Event()  # set with ``stop`` when a call has not returned
        self.origin = time.monotonic()
        self.flight = InFlight(self.origin)
        self._threads: list[threading.Thread] = []
        self.ran_s = 0.0  # from start until a hang was seen or the workers finished

    # ---- running and watching ----

    def start(self, pod_workers: int, update_loops: int) -> None:
        self.origin = time.monotonic()
        self.flight = InFlight(self.origin)
        targets: list[tuple[str, Callable[[str], None]]] = [
            *((f"pods-{i}", self._pod_cycle) for i in range(pod_workers)),
            ("exclusive", self._exclusive_cycle),
        ]
        for name, cycle in targets:
            self._spawn(name, self._cycles, name, cycle)
        for i in range(update_loops):
            self._spawn(f"updates-{i}", self._update_loop, f"updates-{i}", i)

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=f"churn-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def run(self, duration_s: float) -> list[Call]:
        """Until ``duration_s`` has passed and every worker finished its cycle: []. As soon as
        a call has waited HANG_S: every call in flight, the longest first. Then the workers are
        told to stop, and an error that ends a waiting call (containerd killed) is not counted."""
        deadline = self.origin + duration_s
        while any(t.is_alive() for t in self._threads):
            calls = self.flight.now()
            if calls and calls[0].age_s >= HANG_S:
                self.hung.set()
                self.stop.set()
                self.ran_s = time.monotonic() - self.origin
                return calls
            if time.monotonic() >= deadline:
                self.stop.set()
            time.sleep(WATCH_INTERVAL_S)
        self.ran_s = time.monotonic() - self.origin
        return []

    def finish(self) -> list[str]:
        """Stop the workers; the names of threads still running after JOIN_TIMEOUT_S."""
        self.stop.set()
        end = time.monotonic() + JOIN_TIMEOUT_S
        for thread in self._threads:
            thread.join(max(0.0, end - time.monotonic()))
        return [t.name for t in self._threads if t.is_alive()]

    # ---- CRI workers ----

    def _cri(self, worker: str, name: str, call: Callable[[], T]) -> T:
        with self.flight.call(worker, name):
            result = call()
        with self.tally.lock:
            self.tally.cri_calls += 1
        return result

    def _cycles(self, worker: str, cycle: Callable[[str], None]) -> None:
        while not self.stop.is_set():
            try:
                cycle(worker)
            except grpc.RpcError as exc:
                if self.hung.is_set():
                    return  # containerd was killed under a call (a hang was found)
                with self.tally.lock:
                    self.tally.errors.append(f"{worker}: {exc.code().name} {exc.details()}")

    @contextlib.contextmanager
    def _pod(self, worker: str, name: str) -> Iterator[Pod]:
        """A pod for one cycle, stopped and removed however the cycle ends."""
        cri = self.cri
        pod = self._cri(worker, "RunPodSandbox", lambda: cri.run_pod(name))
        try:
            yield pod
        finally:
            self._cri(worker, "StopPodSandbox", lambda: cri.stop_pod(pod.id))
            self._cri(worker, "RemovePodSandbox", lambda: cri.remove_pod(pod.id))

    def _container_life(self, worker: str, pod: Pod, name: str, command: list[str] | None,
                        resources: dict[str, Any] | None = None) -> str:
        cri = self.cri
        cid = self._cri(worker, "CreateContainer",
                        lambda: cri.create_container(pod, name, resources, command))
        self._cri(worker, "StartContainer", lambda: cri.start_container(cid))
        return cid

    def _end(self, worker: str, cid: str) -> None:
        cri = self.cri
        self._cri(worker, "StopContainer", lambda: cri.stop_container(cid))
        self._cri(worker, "RemoveContainer", lambda: cri.remove_container(cid))

    def _exited(self, worker: str, cid: str) -> None:
        """Until ContainerStatus says EXITED, then RemoveContainer, as kubelet removes a
        container that ended on its own. The wait counts as one call: an exit that containerd
        never finishes handling (its NotifyContainerExit in the lock cycle) is a hang too.

        Not StopContainer first: it returns once containerd saw the exit, which can be before
        the status says so, and RemoveContainer then refuses a "still running" container."""
        cri = self.cri
        exited = cri.pb.CONTAINER_EXITED
        with self.flight.call(worker, "ContainerStatus until EXITED"):
            while cri.container_status(cid)[0].state != exited:
                with self.tally.lock:
                    self.tally.cri_calls += 1
                time.sleep(EXIT_POLL_S)
        with self.tally.lock:
            self.tally.cri_calls += 1
        self._cri(worker, "RemoveContainer", lambda: cri.remove_container(cid))

    def _pod_cycle(self, worker: str) -> None:
        """A pod with a long-running container (updated through CRI, as kubelet does) and
        one that exits on its own; both stopped and removed, then the pod."""
        cri = self.cri
        with self._pod(worker, worker) as pod:
            long = self._container_life(worker, pod, "long", None)
            self._cri(worker, "UpdateContainerResources",
                      lambda: cri.update_cpu_shares(long, CHURN_SHARES))
            quick = self._container_life(worker, pod, "quick", QUICK_COMMAND)
            self._end(worker, long)
            self._exited(worker, quick)
        with self.tally.lock:
            self.tally.pod_cycles += 1

    def _exclusive_cycle(self, worker: str) -> None:
        """A Guaranteed container that gets an exclusive CPU from cpu-pools and exits on its
        own. Its RemoveContainer makes the policy push the grown shared pool to every other
        container through the bridge (the product's own POST /v1/updates)."""
        with self._pod(worker, worker) as pod:
            cid = self._container_life(worker, pod, "exclusive", QUICK_COMMAND,
                                       self.exclusive_resources)
            self._exited(worker, cid)
        with self.tally.lock:
            self.tally.exclusive_cycles += 1

    # ---- unsolicited updates ----

    def _update_loop(self, worker: str, offset: int) -> None:
        """One container's cpu shares per POST, round the steady containers, alternating."""
        transport = httpx.HTTPTransport(uds=str(self.control_socket))
        with httpx.Client(transport=transport, base_url="http://bridge",
                          timeout=UPDATE_HTTP_TIMEOUT_S) as client:
            n = offset
            while not self.stop.is_set():
                cid = self.steady[n % len(self.steady)]
                shares = UPDATE_SHARES[(n // len(self.steady)) % len(UPDATE_SHARES)]
                n += 1
                body = {"update": [{"container_id": cid,
                                    "linux": {"resources": {"cpu": {"shares": shares}}}}]}
                started = time.monotonic()
                try:
                    with self.flight.call(worker, POST_UPDATES):
                        reply = client.post("/v1/updates", json=body)
                except httpx.HTTPError:
                    reply = None
                with self.tally.lock:
                    if reply is not None and reply.status_code == 200:
                        failed = len(reply.json()["failed"])
                        self.tally.updates_sent += 1 - failed
                        self.tally.updates_failed += failed
                        self.tally.update_s.append(time.monotonic() - started)
                        continue
                    self.tally.update_errors += 1
                self.stop.wait(UPDATE_RETRY_S)

    def quiet_round_trips(self, count: int) -> list[float]:
        """`count` updates one after another before the churn: the latency on a quiet node."""
        transport = httpx.HTTPTransport(uds=str(self.control_socket))
        out = []
        with httpx.Client(transport=transport, base_url="http://bridge",
                          timeout=UPDATE_HTTP_TIMEOUT_S) as client:
            for n in range(count):
                cid = self.steady[n % len(self.steady)]
                body = {"update": [{"container_id": cid, "linux": {"resources": {
                    "cpu": {"shares": UPDATE_SHARES[n % len(UPDATE_SHARES)]}}}}]}
                started = time.monotonic()
                reply = client.post("/v1/updates", json=body)
                out.append(time.monotonic() - started)
                assert reply.status_code == 200 and reply.json()["failed"] == [], reply.text
        return out

    def report(self, pushes: int) -> str:
        t = self.tally
        with t.lock:
            return (f"{self.ran_s:.0f} s of churn: {t.cri_calls} CRI calls "
                    f"({t.pod_cycles} pod cycles, {t.exclusive_cycles} exclusive-CPU cycles), "
                    f"{t.updates_sent} updates sent through POST /v1/updates "
                    f"({t.updates_failed} reported failed, {t.update_errors} POSTs refused "
                    f"or unanswered; round trip {percentiles(t.update_s)}), "
                    f"{pushes} pushes by cpu-pools, {len(t.errors)} CRI errors")


def percentiles(samples: list[float]) -> str:
    """p50/p95/max in milliseconds, for the report line."""
    if not samples:
        return "no samples"
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return f"p50 {at(0.5):.0f} ms, p95 {at(0.95):.0f} ms, max {ordered[-1] * 1000:.0f} ms"
