"""Real processes for the fault and load tests: the bridge CLI and nri-policy-server.

Each is started with asyncio's subprocess API and stopped by its own PID
(SIGTERM, then SIGKILL after a bound). What the tests read from outside:
RSS and open fds from /proc/<pid>, Prometheus metrics from the control
socket, JSON log lines from the log file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.waiting import WaitTimeout, accepts, until

REPO = Path(__file__).resolve().parents[2]
POLICY_SERVER = Path(sys.executable).parent / "nri-policy-server"
STOP_TIMEOUT_S = 5.0


def rss_kb(pid: int) -> int:
    return _status(pid, "VmRSS")


def peak_rss_kb(pid: int) -> int:
    return _status(pid, "VmHWM")


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise LookupError(f"{key} not in /proc/{pid}/status")


def open_fds(pid: int) -> dict[str, int]:
    """Open file descriptors by kind: socket, pipe, anon_inode, file."""
    kinds: dict[str, int] = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:
            continue  # closed while we looked
        kind = target.split(":", 1)[0] if target.split(":", 1)[0] in (
            "socket", "pipe", "anon_inode") else "file"
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


class Process:
    """One child process, its log file, and a bounded stop by PID."""

    def __init__(self, proc: asyncio.subprocess.Process, log_path: Path,
                 own_group: bool = False) -> None:
        self.proc = proc
        self.log_path = log_path
        self.own_group = own_group

    @classmethod
    async def start(cls, argv: Sequence[str], log_path: Path,
                    own_group: bool = False) -> Process:
        """Start `argv`. With `own_group` it leads a new process group, and `kill` stops the
        whole group: for a child that starts processes of its own (a benchmark's bridge and
        policy server), which would outlive it if only its PID were killed."""
        with log_path.open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=REPO, stdin=asyncio.subprocess.DEVNULL, stdout=log,
                stderr=asyncio.subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=own_group)
        return cls(proc, log_path, own_group)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc.returncode is None

    def signal(self, sig: int) -> None:
        if self.running:
            self.proc.send_signal(sig)

    async def terminate(self, timeout_s: float = STOP_TIMEOUT_S) -> tuple[int, float]:
        """SIGTERM; returns (exit code, seconds until exit). Kills after `timeout_s`."""
        started = time.monotonic()
        self.signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout_s)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(f"pid {self.pid} ignored SIGTERM for {timeout_s}s") from None
        return code, time.monotonic() - started

    async def kill(self) -> None:
        if self.own_group:
            # The group outlives its leader while any member runs: kill it even when the
            # leader has exited.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        elif self.running:
            self.proc.kill()
        await self.proc.wait()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def json_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    lines.append(json.loads(line))
        return lines


class BridgeProcess(Process):
    control_sock: Path

    async def wait_log(self, msg: str, timeout_s: float = 10.0, count: int = 1,
                       ) -> list[dict[str, Any]]:
        """Until `count` JSON log lines with message `msg` have been written."""
        def found() -> list[dict[str, Any]] | None:
            lines = [line for line in self.json_lines() if line.get("msg") == msg]
            if len(lines) >= count:
                return lines
            # Read before the exit check: a line written just before exiting still counts.
            if not self.running:
                raise AssertionError(f"bridge exited ({self.proc.returncode}) before "
                                     f"logging {msg!r}:\n{self.log_text()[-3000:]}")
            return None
        return await until(found, what=f"the bridge logs {msg!r} {count} time(s)",
                           timeout_s=timeout_s, details=lambda: self.log_text()[-3000:])

    async def metrics(self) -> dict[str, float]:
        """Every sample of the control API's /metrics, keyed `name{label=value,...}`."""
        transport = httpx.AsyncHTTPTransport(uds=str(self.control_sock))
        async with httpx.AsyncClient(transport=transport, base_url="http://bridge",
                                     timeout=5) as client:
            text = (await client.get("/metrics")).text
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return out


@contextlib.asynccontextmanager
async def bridge_process(workdir: Path, nri_sock: Path, *, config: dict[str, Any] | None = None,
                         subcommand: str = "run", extra: Sequence[str] = (),
                         name: str = "hardening", index: str = "40",
                         python: str = sys.executable) -> AsyncIterator[BridgeProcess]:
    """`python -m bridge <subcommand>` with a JSON log and a control socket; stopped by PID."""
    argv = [python, "-m", "bridge", subcommand, "--nri-socket", str(nri_sock),
            "--plugin-name", name, "--plugin-index", index,
            "--control-socket", str(workdir / "control.sock"), "--log-format", "json", *extra]
    if config is not None:
        config_path = workdir / f"bridge-{name}.yaml"
        config_path.write_text(json.dumps(config))  # JSON is YAML
        argv += ["--config", str(config_path)]
    process = await BridgeProcess.start(argv, workdir / f"bridge-{name}.log")
    assert isinstance(process, BridgeProcess)
    process.control_sock = workdir / "control.sock"
    try:
        yield process
    finally:
        if process.running:
            with contextlib.suppress(AssertionError):
                await process.terminate()
        await process.kill()


@contextlib.asynccontextmanager
async def policy_process(workdir: Path, sock: Path, module: Path,
                         ) -> AsyncIterator[Process]:
    """`nri-policy-server` serving `module` on `sock`; stopped by PID."""
    process = await start_policy(workdir, sock, module)
    try:
        yield process
    finally:
        if process.running:
            with contextlib.suppress(AssertionError):
                await process.terminate()
        await process.kill()


async def start_policy(workdir: Path, sock: Path, module: Path) -> Process:
    process = await Process.start(
        [str(POLICY_SERVER), "--uds", str(sock), "--policy-module", str(module),
         "--no-koordinator", "--log-level", "warning"], workdir / "policy.log")
    try:
        await until(accepts(sock), what=f"the policy server listens on {sock}", timeout_s=15.0,
                    in_thread=True, proc=process.proc, details=process.log_text)
    except WaitTimeout:  # what until raises (an AssertionError), never TimeoutError
        await process.kill()
        raise
    return process
