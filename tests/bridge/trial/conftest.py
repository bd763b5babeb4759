"""A real nri-policy-server for the `try` tests: koordinator-qos (examples' rules), the
example user policy, and a policy that rejects, on a private Unix socket."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.kube import NodeSpec
from bridge.trial.node_root import write_node
from tests.waiting import healthz, log_tail, wait_until

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
STARTUP_TIMEOUT_S = 60.0  # a ceiling against hangs on a busy machine, not a measurement
REJECTING_POLICY = '''
from policy_server import Decision, Event, EventName, Policy

policy = Policy("no-latest", description="reject images tagged :latest")


@policy.on(EventName.CREATE_CONTAINER)
def no_latest(event: Event) -> Decision | None:
    image = event.container.annotations.get("io.kubernetes.cri.image-name", "")
    if image.endswith(":latest"):
        return Decision(reject=f"image {image} uses :latest")
    return Decision(warnings=(f"checked {image}",))
'''


@pytest.fixture(scope="module")
def policy_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("policy")
    module = work / "no_latest.py"
    module.write_text(REJECTING_POLICY)
    with policy_server(work, "--rules", str(REPO / "examples" / "koordinator-rules.yaml"),
                       "--policy-module", str(REPO / "examples" / "label_env_policy.py"),
                       "--policy-module", str(module)) as sock:
        yield sock


@contextlib.contextmanager
def policy_server(work: Path, *args: str) -> Iterator[Path]:
    """A real nri-policy-server on `work`/p.sock, stopped (by its handle) on leaving; it reads
    the topology of `try`'s default node (8 CPUs), not this machine's: the trials it serves
    play on that node (bridge.trial.node_root)."""
    sock = work / "p.sock"
    sys_root = write_node(NodeSpec(), work / "node")
    with (work / "policy.log").open("wb") as log:
        proc = subprocess.Popen([str(BIN / "nri-policy-server"), "--uds", str(sock),
                                 "--sys-root", str(sys_root), *args],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(healthz(sock), what="the private policy server is healthy",
                   timeout_s=STARTUP_TIMEOUT_S, proc=proc, details=log_tail(work / "policy.log"))
        yield sock
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def bridge_config(tmp_path: Path, sock: Path) -> Path:
    """examples/try-bridge.yaml pointed at the private policy socket."""
    text = (REPO / "examples" / "try-bridge.yaml").read_text()
    config = tmp_path / "bridge.yaml"
    config.write_text(text.replace("/tmp/nri-try.sock", str(sock)))
    return config


def run_try(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", "try", *args], input=stdin,
                          capture_output=True, text=True, timeout=300, check=False)
