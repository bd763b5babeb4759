"""SIGTERM at every phase of start-up and shutdown: both programs always exit 0, cleanly.

The phases are made exact with the programs' test hook
(bridge.process_setup.stop_signals.checkpoint): with ``NRI_STOP_CHECKPOINT`` naming a phase,
the process stops itself there (SIGSTOP); the test sees it stopped (waitpid WUNTRACED), sends
SIGTERM, then SIGCONT, so the signal is delivered exactly at that point. For a shutdown phase
the first SIGTERM is sent at the program's ready phase and the second one at the phase under
test. No sleeps decide anything here; the waits only have generous ceilings against hangs.

Before the stop-signal latch, a SIGTERM in the first second (the imports) or after the event
loop had closed ended either program with the default action: exit -15.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bridge.process_setup.stop_signals import CHECKPOINT_ENV
from tests.waiting import WaitTimeout, wait_until

pytestmark = pytest.mark.processes  # starts processes: not in make check

REPO = Path(__file__).resolve().parents[2]
POLICY_MODULE = REPO / "examples" / "label_env_policy.py"
WAIT_S = 120.0  # a ceiling against hangs only; a phase is reached in about a second
POLL_S = 0.01


@dataclass(frozen=True, slots=True)
class Program:
    name: str
    command: Callable[[Path], list[str]]
    socket: Callable[[Path], Path]  # a file the program creates and must remove on the way out
    ready: str  # the phase at which it serves
    start_up: tuple[str, ...]
    shutdown: tuple[str, ...]


def policy_server_command(work: Path) -> list[str]:
    return [sys.executable, "-m", "policy_server.main", "--uds", str(work / "p.sock"),
            "--no-koordinator", "--policy-module", str(POLICY_MODULE), "--log-level", "warning"]


def bridge_command(work: Path) -> list[str]:
    # No runtime listens at the NRI socket: the bridge serves its control API and retries.
    return [sys.executable, "-m", "bridge", "run", "--nri-socket", str(work / "nri.sock"),
            "--control-socket", str(work / "control.sock"), "--log-level", "warning"]


POLICY_SERVER = Program(
    "policy-server", policy_server_command, lambda work: work / "p.sock", ready="started",
    start_up=("entry", "main", "bound", "loop", "handlers", "started"),
    shutdown=("shutting-down", "handlers-restored", "loop-closed", "exiting"))
BRIDGE = Program(
    "bridge", bridge_command, lambda work: work / "control.sock", ready="serving",
    start_up=("entry", "configured", "serving"),
    shutdown=("shutting-down", "loop-closed", "exiting"))

CASES = [pytest.param(program, phase, id=f"{program.name}-{phase}")
         for program in (POLICY_SERVER, BRIDGE)
         for phase in (*program.start_up, *program.shutdown)]


def wait_status(pid: int, what: str, log: Path) -> int:
    """waitpid(WUNTRACED) with a ceiling: the raw status of the next stop or exit."""
    def stopped_or_exited() -> tuple[int] | None:
        done, status = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
        return (status,) if done == pid else None  # a tuple: status 0 (exit 0) is falsy
    try:
        [status] = wait_until(stopped_or_exited, what=what, timeout_s=WAIT_S, interval_s=POLL_S,
                              details=lambda: f"stderr:\n{log.read_text()}")
    except WaitTimeout:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    return status


def run_stopping_at(command: list[str], phases: list[str], work: Path) -> int:
    """Run ``command``; at each of ``phases`` in turn, SIGTERM it there. Its exit code."""
    log = work / "stderr.log"
    env = {**os.environ, CHECKPOINT_ENV: ",".join(phases)}
    with log.open("wb") as err:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
    for phase in phases:
        status = wait_status(proc.pid, f"stop at phase {phase!r}", log)
        if not os.WIFSTOPPED(status):
            proc.returncode = os.waitstatus_to_exitcode(status)
            raise AssertionError(f"exited with {proc.returncode} before phase {phase!r}; "
                                 f"stderr:\n{log.read_text()}")
        os.kill(proc.pid, signal.SIGTERM)  # pending while stopped: delivered at this phase
        os.kill(proc.pid, signal.SIGCONT)
    status = wait_status(proc.pid, "exit", log)
    assert not os.WIFSTOPPED(status), f"stopped again after {phases}; a phase named twice?"
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert "Traceback" not in log.read_text(), log.read_text()
    return proc.returncode


@pytest.mark.parametrize(("program", "phase"), CASES)
def test_sigterm_at_each_phase_exits_0(program: Program, phase: str, tmp_path: Path) -> None:
    phases = [phase] if phase in program.start_up else [program.ready, phase]
    assert run_stopping_at(program.command(tmp_path), phases, tmp_path) == 0
    assert not program.socket(tmp_path).exists(), "socket file left behind"


@pytest.mark.parametrize("script", ["nri-policy-server", "nri-webhook-bridge"])
def test_the_installed_scripts_catch_sigterm_before_loading(script: str, tmp_path: Path) -> None:
    """The console scripts' entry points (pyproject.toml) catch the signals first too."""
    program = POLICY_SERVER if script == "nri-policy-server" else BRIDGE
    command = [str(Path(sys.executable).parent / script), *program.command(tmp_path)[3:]]
    assert run_stopping_at(command, ["entry"], tmp_path) == 0
    assert not program.socket(tmp_path).exists()
