"""Run the policy server (``nri-policy-server``) and a webhook-configured bridge for a test.

Owns: writing the koordinator-qos rules file (and rewriting it atomically for hot
reload), starting ``nri-policy-server`` by PID on a private Unix socket with its log
captured to a file, waiting for its ``/healthz``, and a bridge whose config is a
``webhooks:`` list pointing at that socket, with a private control socket (the one the
policy server pushes rule changes through) and a ``/readyz`` wait on it.

Must not: import the bridge or the policy server. Both are black boxes run exactly as an
operator would run them (the console scripts of this venv).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.waiting import accepts, healthz, wait_until

from .bridge_proc import Bridge
from .procs import TIME_SCALE, scaled, stop_by_pid

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STOP_TIMEOUT_S = scaled(10.0)
STARTUP_TIMEOUT_S = scaled(20.0)
RULES_POLL_INTERVAL_S = 0.2


class PolicyServerError(RuntimeError):
    """The policy server exited or did not become healthy."""


def _uds_get(sock: Path, path: str, timeout_s: float = 1.0) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(sock))
    timeout = scaled(timeout_s)
    with httpx.Client(transport=transport, base_url="http://e2e", timeout=timeout) as client:
        return client.get(path)


class PolicyServer:
    """One ``nri-policy-server`` process on ``workdir/policy.sock``."""

    def __init__(
        self,
        workdir: Path,
        *,
        rules: dict[str, Any] | None = None,
        policy_modules: Sequence[Path] = (),
        koordinator: bool = True,
        builtin_policies: Sequence[str] = (),
        bridge_control: Path | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.extra_args = tuple(extra_args)
        self.workdir = workdir
        self.socket = workdir / "policy.sock"
        self.rules = workdir / "rules.yaml" if rules is not None else None
        self.log = workdir / "policy.log"
        self.policy_modules = tuple(policy_modules)
        self.koordinator = koordinator
        self.builtin_policies = tuple(builtin_policies)  # NAME or NAME=CONFIG, as --policy takes
        self.bridge_control = bridge_control
        self._proc: subprocess.Popen[bytes] | None = None
        if rules is not None:
            self.write_rules(rules)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def url(self, policy: str) -> str:
        """The bridge webhook URL of one policy endpoint."""
        return f"unix://{self.socket}/v1/policies/{policy}"

    def write_rules(self, rules: dict[str, Any]) -> None:
        """Replace the rules file atomically (JSON is YAML): a new inode, as a ConfigMap does."""
        assert self.rules is not None, "this server was started without --rules"
        tmp = self.rules.with_suffix(".tmp")
        tmp.write_text(json.dumps(rules, indent=2) + "\n")
        os.replace(tmp, self.rules)

    def command(self) -> list[str]:
        # info: at debug every bridge-control call logs a dozen httpcore lines.
        cmd = [str(BIN / "nri-policy-server"), "--uds", str(self.socket), "--log-level", "info"]
        if self.rules is not None:
            cmd += ["--rules", str(self.rules),
                    "--rules-poll-interval", str(RULES_POLL_INTERVAL_S)]  # fmt: skip
        for module in self.policy_modules:
            cmd += ["--policy-module", str(module)]
        for builtin in self.builtin_policies:
            cmd += ["--policy", builtin]
        if not self.koordinator:
            cmd.append("--no-koordinator")
        if self.bridge_control is not None:
            cmd += ["--bridge-control", f"unix://{self.bridge_control}"]
        return [*cmd, *self.extra_args]

    def start(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with self.log.open("ab") as out:
            self._proc = subprocess.Popen(
                self.command(),
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait_healthy(self, timeout_s: float = STARTUP_TIMEOUT_S) -> dict[str, Any]:
        def health() -> dict[str, Any] | None:
            if not accepts(self.socket)():
                return None  # httpx would leave the socket of a refused connect open
            try:
                reply = _uds_get(self.socket, "/healthz")
            except httpx.HTTPError:
                return None
            body: dict[str, Any] | None = reply.json() if reply.status_code == 200 else None
            return body
        assert self._proc is not None, "not started"
        return wait_until(health, what="nri-policy-server is healthy", timeout_s=timeout_s,
                          proc=self._proc, details=self.tail)

    def get(self, path: str) -> dict[str, Any]:
        reply = _uds_get(self.socket, path, timeout_s=5.0)
        reply.raise_for_status()
        body: dict[str, Any] = reply.json()
        return body

    def get_text(self, path: str) -> str:
        reply = _uds_get(self.socket, path, timeout_s=5.0)
        reply.raise_for_status()
        return reply.text

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        stop_by_pid(proc, STOP_TIMEOUT_S)

    def raw_log(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.raw_log().splitlines()[-lines:])


def scaled_webhook(hook: dict[str, Any]) -> dict[str, Any]:
    """``hook`` with its call timeouts (given, or the bridge's 1 s default) multiplied by the
    harness's time scale: under emulation a policy answers many times slower (tests/e2e/procs.py).
    Unchanged on a host."""
    if TIME_SCALE == 1:
        return hook
    out = dict(hook)
    for key in ("timeout", "sync_timeout"):
        text = str(hook.get(key, "1s"))
        seconds = float(text[:-2]) / 1000 if text.endswith("ms") else float(text.rstrip("s"))
        out[key] = f"{min(seconds * TIME_SCALE, 60):g}s"
    return out


class WebhookBridge(Bridge):
    """The bridge with a ``webhooks:`` config (its control socket is private, as every bridge's).

    Reuses ``Bridge`` (start/stop by PID, JSON log reading, ``wait_for``); only the
    config file and the log level differ.
    """

    def __init__(self, nri_socket: Path, workdir: Path, webhooks: list[dict[str, Any]]) -> None:
        super().__init__(nri_socket, workdir, static={})
        self.webhooks = [scaled_webhook(hook) for hook in webhooks]
        self.config.write_text(json.dumps({"webhooks": self.webhooks}, indent=2) + "\n")

    def command(self) -> list[str]:
        # info, not debug: at debug every webhook call logs a dozen httpcore lines.
        cmd = super().command()
        cmd[cmd.index("--log-level") + 1] = "info"
        return cmd

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """``/readyz`` on the control socket: registered with the runtime and serving."""
        assert self._proc is not None, "not started"
        wait_until(healthz(self.control_socket, "/readyz"), what="the bridge is ready",
                   timeout_s=timeout_s, proc=self._proc, details=self.tail)

    def state(self) -> dict[str, Any]:
        """``GET /v1/state``: the pods and containers the bridge knows."""
        reply = _uds_get(self.control_socket, "/v1/state", timeout_s=5.0)
        reply.raise_for_status()
        body: dict[str, Any] = reply.json()
        return body
