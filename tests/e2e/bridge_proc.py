"""Run the bridge (``nri-webhook-bridge run``) as an external NRI plugin for a test.

Owns: writing its YAML config, starting it by PID against a containerd's private NRI
socket with JSON logs on stderr captured to a file, reading those log lines back, and
stopping it by PID.

Must not: import the bridge. The e2e treats it as a black box, exactly as an operator
would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.waiting import wait_until

from .procs import scaled, stop_by_pid
from .runtimes import InstanceDirs

REPO = Path(__file__).resolve().parents[2]
PLUGIN_NAME = "e2e-bridge"
PLUGIN_INDEX = "50"
STOP_TIMEOUT_S = scaled(10.0)

LogLine = dict[str, Any]


class BridgeError(RuntimeError):
    """The bridge exited or did not log what a test waited for."""


class Bridge:
    """One bridge process. ``static`` is the config's ``static`` section."""

    def __init__(self, nri_socket: Path, workdir: Path, static: dict[str, Any],
                 cri_socket: Path | None = None) -> None:
        self.nri_socket = nri_socket
        # The bridge updates containers through the runtime's CRI socket (containerd 1.7.24 and
        # 2.1.9 can deadlock on NRI UpdateContainers); by default, that of the containerd whose
        # NRI socket this is (tests/e2e/runtimes.py: InstanceDirs).
        self.cri_socket = cri_socket or InstanceDirs(nri_socket.parent.parent).address
        self.static = static
        self.workdir = workdir
        self.config = workdir / "bridge.yaml"
        self.log = workdir / "bridge.log"
        # Private, not the default /run/nri-webhook-bridge/control.sock: another run's bridge
        # (make e2e beside make shipped, or a second checkout) must never meet this one there.
        self.control_socket = workdir / "control.sock"
        self._proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)
        # JSON is YAML: no need for a YAML writer here.
        self.config.write_text(json.dumps({"static": static}, indent=2) + "\n")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        # `python -m bridge` from the repo root is what the console script runs, and it
        # does not depend on how the editable install mapped the package.
        return [
            sys.executable, "-m", "bridge", "run",
            "--nri-socket", str(self.nri_socket),
            "--cri-socket", str(self.cri_socket),
            "--plugin-name", PLUGIN_NAME,
            "--plugin-index", PLUGIN_INDEX,
            "--config", str(self.config),
            "--log-format", "json",
            "--log-level", "debug",
            "--control-socket", str(self.control_socket),
        ]  # fmt: skip

    def start(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with self.log.open("ab") as err:
            self._proc = subprocess.Popen(
                self.command(),
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                start_new_session=True,
            )

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        stop_by_pid(proc, STOP_TIMEOUT_S)

    def raw_log(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def lines(self) -> list[LogLine]:
        """Every JSON object the bridge logged so far (non-JSON lines are skipped)."""
        out = []
        for text in self.raw_log().splitlines():
            try:
                item = json.loads(text)
            except ValueError:
                continue
            if isinstance(item, dict):
                out.append(item)
        return out

    def wait_for(
        self, what: str, match: Callable[[LogLine], bool], timeout_s: float = 15.0
    ) -> LogLine:
        """Wait for a log line that ``match``es; fail with the log tail as context."""
        def found() -> LogLine | None:
            return next((line for line in self.lines() if match(line)), None)
        assert self._proc is not None, "not started"
        return wait_until(found, what=f"{what} in the bridge log", timeout_s=scaled(timeout_s),
                          proc=self._proc, details=self.tail)

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.raw_log().splitlines()[-lines:])


def is_event(name: str, container_id: str | None = None) -> Callable[[LogLine], bool]:
    def match(line: LogLine) -> bool:
        if line.get("event") != name:
            return False
        return container_id is None or line.get("container_id") == container_id

    return match


def has_msg(text: str) -> Callable[[LogLine], bool]:
    return lambda line: line.get("msg") == text
