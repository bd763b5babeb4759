"""A private `nri-policy-server` for one run of `try` or `test` (`--policy-module`, `--rules`).

Owns: starting a real `nri-policy-server` process on a Unix socket in a private directory,
with the given policy modules, built-in policies (each with its configuration) and
koordinator-qos rules, in the environment it is given, on the simulated node (its sysfs and
procfs written by bridge.trial.node_root), and every node effect off (no cgroup,
procfs or resctrl writes: its roots point into the private directory; no bridge control API,
no reconciler), waiting until it serves, asking it which policies it serves and for which events
(`GET /v1/policies`), turning that into a bridge configuration document (one webhook per policy),
and stopping it by its handle. A server that refuses to start (a bad module or rules file) is a
`PolicySetupError` carrying the server's own one-line message: bad input, exit 2.
Must not: import the policy server (the bridge never does; it runs the program), or touch a
server it did not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bridge.contract.catalogue import EVENT_NAMES
from bridge.kube import NodeSpec
from bridge.trial.node_root import write_node
from bridge.trial.process import stop_process

SERVER_START_TIMEOUT_S = 60.0  # a ceiling against hangs on a busy machine, not a measurement
SERVER_STOP_TIMEOUT_S = 10.0
QUERY_TIMEOUT_S = 10.0
SERVING_MESSAGE = "serving "  # policy_server.main logs it once the socket listens
_TAIL_LINES = 20


class PolicySetupError(Exception):
    """The private server could not start: the message is the server's own (bad input)."""


@dataclass(frozen=True, slots=True)
class PrivatePolicies:
    """What the private server serves: policy modules (files) and koordinator-qos rules."""

    modules: tuple[str, ...] = ()
    rules: str | None = None
    cgroup_version: int = 2  # the node's: what the policies are told (node.facts)
    # Built-in policies (`--policy NAME[=CONFIG]`): name, and a configuration file or an
    # inline configuration (written into the private directory), or neither (defaults).
    builtins: tuple[tuple[str, str | dict[str, Any] | None], ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # set for the server: what its policies read
    # The simulated node whose topology the server reads (bridge.trial.node_root): rules
    # naming CPUs or NUMA nodes it does not have are refused.
    node: NodeSpec = field(default_factory=NodeSpec)

    def __bool__(self) -> bool:
        return bool(self.modules) or self.rules is not None or bool(self.builtins)

    def check(self) -> None:
        """Refuse files that do not exist before anything starts (ValueError: bad input)."""
        for flag, path in [*(("--policy-module", m) for m in self.modules),
                           *((("--rules", self.rules),) if self.rules else ())]:
            if not Path(path).is_file():
                raise ValueError(f"{flag}: {path}: no such file")
        for name, config in self.builtins:  # a file or a directory: the policy says which
            if isinstance(config, str) and not Path(config).exists():
                raise ValueError(f"--policy {name}: {config}: no such file or directory")


def server_command(policies: PrivatePolicies, work: Path) -> list[str]:
    """The `nri-policy-server` command line: the policies, node effects off, roots private."""
    command = [sys.executable, "-m", "policy_server.main", "--uds", str(work / "policy.sock"),
               "--log-format", "json", "--pod-cgroup-writes", "off", "--reconcile-interval", "0",
               "--cgroup-root", str(work / "cgroup"), "--proc-root", str(work / "proc"),
               "--resctrl-root", str(work / "resctrl"), "--sys-root", str(work / "sys"),
               "--cgroup-version", str(policies.cgroup_version)]
    for module in policies.modules:
        command += ["--policy-module", str(Path(module).resolve())]
    for name, config in policies.builtins:
        if isinstance(config, dict):
            inline = work / f"policy-{len(command)}.yaml"
            inline.write_text(json.dumps(config))  # JSON is YAML
            config = str(inline)
        command += ["--policy", name if config is None else f"{name}={Path(config).resolve()}"]
    if policies.rules is not None:
        command += ["--rules", str(Path(policies.rules).resolve())]
    else:
        command.append("--no-koordinator")
    return command


def bridge_document(socket_path: Path, served: list[dict[str, Any]]) -> dict[str, Any]:
    """A bridge configuration: one webhook per served policy, subscribed to the events it
    handles (those the bridge can deliver), named as the policy."""
    hooks = []
    for policy in served:
        events = [e for e in policy.get("events", []) if e in EVENT_NAMES]
        if events:
            hooks.append({"name": policy["name"], "events": events,
                          "url": f"unix://{socket_path}/v1/policies/{policy['name']}"})
    return {"webhooks": hooks}


@contextlib.asynccontextmanager
async def private_server(policies: PrivatePolicies, work: Path) -> AsyncIterator[dict[str, Any]]:
    """Run the server for the block; yields the bridge configuration document for it.
    `work`: an existing directory of ours (mode 0700) for its socket and roots."""
    write_node(policies.node, work)
    proc = await asyncio.create_subprocess_exec(
        *server_command(policies, work), env={**os.environ, **dict(policies.env)},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        start_new_session=True)
    log = _ServerLog()
    assert proc.stderr is not None
    reader = asyncio.create_task(log.drain(proc.stderr), name="policy-server-log")
    try:
        await _wait_serving(proc, log)
        served = await _served(work / "policy.sock")
        yield bridge_document(work / "policy.sock", served)
    finally:
        await stop_process(proc, SERVER_STOP_TIMEOUT_S)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


class _ServerLog:
    """The server's stderr: the last lines kept, and an event once it says it serves."""

    def __init__(self) -> None:
        self.tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self.serving = asyncio.Event()
        self.closed = asyncio.Event()  # the server closed its stderr (it exited)

    async def drain(self, stream: asyncio.StreamReader) -> None:
        try:
            await self._read(stream)
        finally:
            self.closed.set()

    async def _read(self, stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            line = raw.decode(errors="replace").rstrip()
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                line = str(json.loads(line).get("msg", line))
            self.tail.append(line)
            if line.startswith(SERVING_MESSAGE):
                self.serving.set()

    def error(self) -> str:
        """The server's own error line (`nri-policy-server: ...`), without its program name."""
        for line in reversed(self.tail):
            if line.startswith("nri-policy-server: "):
                return line.removeprefix("nri-policy-server: ")
        return " | ".join(list(self.tail)[-5:]) or "no output"


async def _wait_serving(proc: asyncio.subprocess.Process, log: _ServerLog) -> None:
    serving = asyncio.create_task(log.serving.wait())
    exited = asyncio.create_task(proc.wait())
    try:
        done, _ = await asyncio.wait({serving, exited}, timeout=SERVER_START_TIMEOUT_S,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (serving, exited):
            task.cancel()
        await asyncio.gather(serving, exited, return_exceptions=True)
    if serving in done and proc.returncode is None:
        return
    if exited in done or proc.returncode is not None:
        # Its last lines (the error) may still be in the pipe: quote them once all are read.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(log.closed.wait(), SERVER_STOP_TIMEOUT_S)
        if proc.returncode == 2:  # nri-policy-server: a startup error the user must fix
            raise PolicySetupError(log.error())
        raise OSError(f"the policy server exited with code {proc.returncode}: {log.error()}")
    raise OSError(f"the policy server did not start within {SERVER_START_TIMEOUT_S:.0f}s: "
                  f"{log.error()}")


async def _served(socket_path: Path) -> list[dict[str, Any]]:
    transport = httpx.AsyncHTTPTransport(uds=str(socket_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://policy-server",
                                 timeout=QUERY_TIMEOUT_S) as client:
        try:
            reply = await client.get("/v1/policies")
            reply.raise_for_status()
            policies = reply.json()["policies"]
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise OSError(f"cannot list the policy server's policies: {exc}") from None
    if not isinstance(policies, list):
        raise OSError("cannot list the policy server's policies: not a list")
    return policies
