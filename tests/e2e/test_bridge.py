"""The bridge against real containerd (1.7.24 / NRI v0.6.1 and 2.1.9 / NRI v0.8.0).

Each test starts its own bridge process with the built-in static handler, drives
pods and containers through CRI, and asserts on real effects: the running
container's environment and cgroup v1 files, the bridge's JSON log, and what
containerd itself logged about the plugin.
"""

from __future__ import annotations

import os
import re
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until

from .bridge_proc import PLUGIN_INDEX, PLUGIN_NAME, Bridge, LogLine, has_msg, is_event
from .containerd import Containerd
from .cri import BASE_CPU_SHARES, CriClient
from .inspect_proc import cgroup_values, environ_after_exec
from .private_containerd import keep_log
from .runtimes import NRI_REQUEST_TIMEOUT_S

pytestmark = pytest.mark.e2e

ADJUSTED_SHARES = 512
ADJUSTED_CPUSET = "0"
ADJUSTED_MEMORY_BYTES = 128 * 1024 * 1024
UPDATED_SHARES = 640
REQUESTED_SHARES = 768  # what the CRI UpdateContainerResources asks for
SLOW_DELAY_MS = 5000  # far beyond NRI_REQUEST_TIMEOUT_S

STATIC: dict[str, Any] = {
    "adjust": {
        "env": [{"key": "NRI_E2E", "value": "injected"}],
        "linux": {
            "resources": {
                "cpu": {"shares": ADJUSTED_SHARES, "cpus": ADJUSTED_CPUSET},
                "memory": {"limit": ADJUSTED_MEMORY_BYTES},
            }
        },
    },
    "update": {"linux": {"resources": {"cpu": {"shares": UPDATED_SHARES}}}},
    "delay_ms": 0,
}
# How containerd names an external plugin in its log: "NN-name".
PLUGIN_ID = f"{PLUGIN_INDEX}-{PLUGIN_NAME}"
# containerd log lines that mean the runtime dropped or timed out a plugin.
DISCONNECT_RE = re.compile(
    r"(closed|closing|deadline exceeded|timeout|timed out|removing plugin|stopping plugin)",
    re.IGNORECASE,
)

BridgeFactory = Callable[..., Bridge]


@pytest.fixture
def start_bridge(
    containerd: Containerd, cri: CriClient, request: pytest.FixtureRequest
) -> Iterator[BridgeFactory]:
    """Start bridges on this containerd's NRI socket; stop them (by PID) after the test.

    Pods are removed while the bridge still runs (so it sees Stop/Remove events too),
    except after a slow bridge, where that would cost seconds per event.
    """
    started: list[Bridge] = []

    def start(**overrides: Any) -> Bridge:
        # A fresh directory (and so a fresh log) per bridge: waits must never match lines
        # an earlier bridge wrote.
        workdir = Path(tempfile.mkdtemp(prefix="bridge-", dir=containerd.dirs.base))
        bridge = Bridge(containerd.dirs.nri_socket, workdir, {**STATIC, **overrides})
        started.append(bridge)
        bridge.start()
        bridge.wait_for("registration", has_msg("registered"))
        return bridge

    yield start
    try:
        slow = any(b.static.get("delay_ms") for b in started)
        if containerd.running() and not slow:
            cri.remove_all()
    finally:
        for i, bridge in enumerate(started):
            bridge.stop()
            keep_log(bridge.log, f"{request.node.name}-bridge{i}.log".replace("/", "_"))


def assert_adjusted(cri: CriClient, container_id: str) -> None:
    pid = cri.container_pid(container_id)
    env = environ_after_exec(pid)  # /proc/<pid>/environ is empty until the exec
    assert env.get("NRI_E2E") == "injected", f"env of pid {pid}: {sorted(env)}"
    assert env.get("E2E_BASE") == "1"  # the CRI request's own env survives
    values = cgroup_values(pid)
    assert values.cpu_shares == ADJUSTED_SHARES, values
    assert values.cpuset_cpus == ADJUSTED_CPUSET, values
    assert values.memory_limit_bytes == ADJUSTED_MEMORY_BYTES, values


def plugin_disconnects(log_text: str) -> list[str]:
    """containerd log lines about our plugin that look like a drop or a timeout."""
    return [
        line for line in log_text.splitlines() if PLUGIN_NAME in line and DISCONNECT_RE.search(line)
    ]


def count(bridge: Bridge, match: Callable[[LogLine], bool]) -> int:
    return sum(1 for line in bridge.lines() if match(line))


def wait_containerd_log(
    containerd: Containerd, text: str, offset: int, timeout_s: float = 5
) -> None:
    wait_until(lambda: text in containerd.log_since(offset),
               what=f"containerd logs {text!r}", timeout_s=timeout_s)


def test_registers_with_containerd(containerd: Containerd, start_bridge: BridgeFactory) -> None:
    offset = containerd.log_size()
    bridge = start_bridge()
    line = bridge.wait_for("registration", has_msg("registered"))
    assert line.get("runtime") == "containerd"
    assert bridge.running()
    # The runtime saw this very process: containerd names it external:NN-name[pid].
    wait_containerd_log(containerd, f'external:{PLUGIN_ID}[{bridge.pid}]\\" registered', offset)


def test_create_container_is_adjusted(clean_pods: CriClient, start_bridge: BridgeFactory) -> None:
    bridge = start_bridge()
    pod = clean_pods.run_pod("adjust")
    container_id = clean_pods.run_container(pod)
    bridge.wait_for("CreateContainer event", is_event("CreateContainer", container_id))
    assert_adjusted(clean_pods, container_id)


def test_lifecycle_events_reach_bridge(clean_pods: CriClient, start_bridge: BridgeFactory) -> None:
    """Dedicated RPCs and StateChange-delivered events alike (fixtures README)."""
    bridge = start_bridge()
    pod = clean_pods.run_pod("lifecycle")
    container_id = clean_pods.run_container(pod)
    clean_pods.stop_container(container_id)
    clean_pods.remove_container(container_id)
    clean_pods.stop_pod(pod.id)
    clean_pods.remove_pod(pod.id)
    for event in ("CreateContainer", "PostCreateContainer", "StartContainer",
                  "PostStartContainer", "StopContainer", "RemoveContainer"):  # fmt: skip
        bridge.wait_for(f"{event} event", is_event(event, container_id))
    for event in ("RunPodSandbox", "StopPodSandbox", "RemovePodSandbox"):
        bridge.wait_for(f"{event} event", is_event(event))


def test_update_container_reaches_bridge(
    clean_pods: CriClient, start_bridge: BridgeFactory
) -> None:
    bridge = start_bridge()
    pod = clean_pods.run_pod("update")
    container_id = clean_pods.run_container(pod)
    pid = clean_pods.container_pid(container_id)
    assert cgroup_values(pid).cpu_shares == ADJUSTED_SHARES

    clean_pods.update_cpu_shares(container_id, REQUESTED_SHARES)
    bridge.wait_for("UpdateContainer event", is_event("UpdateContainer", container_id))
    # The bridge's ContainerUpdate wins over the CRI request's value.
    assert cgroup_values(pid).cpu_shares == UPDATED_SHARES


def test_reconnects_after_containerd_restart(
    containerd: Containerd, clean_pods: CriClient, start_bridge: BridgeFactory
) -> None:
    bridge = start_bridge()
    pid_before = bridge.pid
    survivor = clean_pods.run_container(clean_pods.run_pod("before-restart"))
    registrations = count(bridge, has_msg("registered"))

    offset = containerd.log_size()
    containerd.restart()
    clean_pods.wait_ready()
    bridge.wait_for("connection loss", has_msg("connection lost"))
    bridge.wait_for(
        "re-registration",
        lambda _: count(bridge, has_msg("registered")) > registrations,
        timeout_s=30,
    )
    assert bridge.running() and bridge.pid == pid_before, "the bridge must reconnect by itself"
    wait_containerd_log(containerd, f'external:{PLUGIN_ID}[{pid_before}]\\" registered', offset)
    # The re-sync carried the container that survived the restart.
    syncs = [x for x in bridge.lines() if x.get("event") == "Synchronize"]
    assert syncs[-1].get("containers", 0) >= 1, syncs[-1]
    assert_adjusted(clean_pods, survivor)

    pod = clean_pods.run_pod("after-restart")
    container_id = clean_pods.run_container(pod)
    bridge.wait_for("CreateContainer event", is_event("CreateContainer", container_id))
    assert_adjusted(clean_pods, container_id)


def test_reconnects_after_being_dropped(
    containerd: Containerd, clean_pods: CriClient, start_bridge: BridgeFactory
) -> None:
    """Control for the slowness test: a bridge that really misses the deadline (frozen
    with SIGSTOP) is dropped by containerd, the drop detector sees it, and the bridge
    comes back by itself once thawed."""
    bridge = start_bridge()
    assert bridge.pid is not None
    registrations = count(bridge, has_msg("registered"))
    offset = containerd.log_size()
    os.kill(bridge.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        clean_pods.run_pod("frozen")  # fail-open: succeeds without the plugin
        assert time.monotonic() - started >= NRI_REQUEST_TIMEOUT_S * 0.9
    finally:
        os.kill(bridge.pid, signal.SIGCONT)
    assert plugin_disconnects(containerd.log_since(offset)), "drop detector saw nothing"

    bridge.wait_for(
        "re-registration after drop",
        lambda _: count(bridge, has_msg("registered")) > registrations,
        timeout_s=30,
    )
    container_id = clean_pods.run_container(clean_pods.run_pod("after-drop"))
    assert_adjusted(clean_pods, container_id)


def test_slow_handler_is_never_dropped(
    containerd: Containerd, clean_pods: CriClient, start_bridge: BridgeFactory
) -> None:
    bridge = start_bridge(delay_ms=SLOW_DELAY_MS)
    offset = containerd.log_size()

    pod = clean_pods.run_pod("slow")
    started = time.monotonic()
    container_id = clean_pods.run_container(pod)
    elapsed = time.monotonic() - started
    bridge.wait_for("CreateContainer event", is_event("CreateContainer", container_id))
    pid = clean_pods.container_pid(container_id)  # created and running
    base = cgroup_values(pid).cpu_shares
    assert base in (BASE_CPU_SHARES, ADJUSTED_SHARES), base

    # A following event still reaches the same bridge process, and the CRI update
    # itself goes through (the slow handler contributes nothing, or its update).
    clean_pods.update_cpu_shares(container_id, REQUESTED_SHARES)
    bridge.wait_for("UpdateContainer event", is_event("UpdateContainer", container_id))
    assert cgroup_values(pid).cpu_shares in (REQUESTED_SHARES, UPDATED_SHARES)
    assert bridge.running()
    assert count(bridge, has_msg("connection lost")) == 0
    assert count(bridge, has_msg("registered")) == 1

    dropped = plugin_disconnects(containerd.log_since(offset))
    assert not dropped, (
        f"containerd dropped/timed out the plugin (request timeout {NRI_REQUEST_TIMEOUT_S}s, "
        f"handler delay {SLOW_DELAY_MS}ms, create+start took {elapsed:.1f}s):\n"
        + "\n".join(dropped)
    )


# Keep containerd away until the bridge's next retry is at least this far off, so that
# coming back sooner can only be the socket watch (issue 13), not the backoff.
LONG_BACKOFF_S = 5.0
_BACKOFF_RE = re.compile(r"at the latest in ([0-9.]+)s")


def _backoff_s(line: LogLine) -> float:
    match = _BACKOFF_RE.search(str(line.get("action", "")))
    return float(match.group(1)) if match else 0.0


def test_reconnects_as_soon_as_containerd_socket_is_back(
    containerd: Containerd, clean_pods: CriClient, start_bridge: BridgeFactory
) -> None:
    bridge = start_bridge()
    registrations = count(bridge, has_msg("registered"))
    containerd.stop()
    waiting = bridge.wait_for(
        f"a backoff of at least {LONG_BACKOFF_S}s",
        lambda line: line.get("msg") == "connection lost" and _backoff_s(line) >= LONG_BACKOFF_S,
        timeout_s=30,
    )
    containerd.start()  # returns once its NRI socket exists
    socket_back = time.monotonic()
    bridge.wait_for("the socket watch", has_msg("runtime socket is back; reconnecting now"))
    bridge.wait_for(
        "re-registration",
        lambda _: count(bridge, has_msg("registered")) > registrations,
    )
    registered = time.monotonic()
    print(f"containerd {containerd.runtime.version}: re-registered "
          f"{registered - socket_back:.3f}s after its NRI socket appeared "
          f"(the backoff would have waited {_backoff_s(waiting):.2f}s)")
    # No clock bound: the "runtime socket is back" line above is the proof that the socket
    # watch, not the backoff timer, ended the wait (a start slower than the backoff on a busy
    # machine would otherwise fail this test for the wrong reason).
    container_id = clean_pods.run_container(clean_pods.run_pod("after-fast-reconnect"))
    bridge.wait_for("CreateContainer event", is_event("CreateContainer", container_id))
    assert_adjusted(clean_pods, container_id)
