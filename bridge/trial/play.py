"""Playing pods through the real bridge against the runtime simulator.

Owns: the run of `nri-webhook-bridge try`: a private directory with the relay
(bridge.trial.relay), the simulated runtime (bridge.simulator, over the real NRI socket
protocol), and the bridge as a real `nri-webhook-bridge run` process connected to it; then,
per pod, kubelet's CRI calls in kubelet's order (bridge.kube.call_order, which the test kit's
`send_pod` drives too) — RunPodSandbox; each init container created, started and (exited)
stopped before the next; sidecars created and started; the regular containers created and
started — then, once every pod is on the node, the pod's `--resize`s in kubelet's steps
(bridge.kube.resize.resize_steps: memory then CPU, one CRI UpdateContainerResources per
container and resource, the pod cgroup's writes in their place but without an event), a
snapshot of what each container ends with, and the teardowns (stop, remove), pod by pod: the
pods of one trial share the node.
Everything started is stopped by its handle before returning. Every failed webhook call is
kept: the relay records those it saw, the bridge's log names the others (a reply the bridge
refused, a call its circuit breaker skipped).
Must not: translate manifests (bridge.kube) or format results (bridge.trial.report).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from bridge.config_file import BridgeConfig
from bridge.contract.runtime_effects import Runtime
from bridge.errors import BridgeError
from bridge.kube import (
    IN_PLACE,
    SNAPSHOT,
    CallStep,
    CriPod,
    NodeSpec,
    container,
    effective,
    kubelet_order,
    pod_sandbox,
)
from bridge.kube.resize import POD, KubeletView, Resize, ResizeStep, resize_steps
from bridge.reply_review.handler_crash import crashes
from bridge.runtime_facts.profiles import DEFAULT_PROFILE, PROFILES, RuntimeProfile
from bridge.simulator.cri_calls import CriResult, run_cri
from bridge.simulator.runtime import SimulatedRuntime
from bridge.simulator.simulator_error import SimulatorError
from bridge.trial.node_root import write_node
from bridge.trial.process import stop_process
from bridge.trial.relay import Exchange, Relay
from bridge.webhooks.specs import MAX_FAILURE_THRESHOLD

# containerd's default NRI request timeout: what the bridge's budgets are derived from.
REQUEST_TIMEOUT_S = 2.0
BRIDGE_START_TIMEOUT_S = 30.0
BRIDGE_STOP_TIMEOUT_S = 10.0
# kubelet's in-place resize (`try --resize`): the runtime runs UpdateContainer (and, where
# the profile has it, PostUpdateContainer).
RESIZE = "UpdateContainerResources"
# The bridge's log line for every failed webhook call (bridge.webhooks.webhook_handler).
CALL_FAILED = "webhook call failed"


class TrialError(Exception):
    """The trial could not run (the bridge did not start, ...); the message says why."""


@dataclass(slots=True)
class ContainerRun:
    """What happened to one container: its CRI calls' results and its final state."""

    pod: CriPod
    name: str
    container_id: str
    calls: list[CriResult] = field(default_factory=list)
    effective: dict[str, Any] | None = None  # the container as the runtime has it, running
    not_started: str | None = None  # why kubelet would not get to this container
    # Each resize step of this container: the resource, kubelet's CRI values, and the
    # container's resources as the runtime has them after the step (the intermediate state).
    resize: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class PodRun:
    pod: CriPod
    sandbox_id: str
    sandbox: CriResult | None = None
    containers: list[ContainerRun] = field(default_factory=list)
    teardown: list[CriResult] = field(default_factory=list)
    resize: list[ResizeStep] = field(default_factory=list)  # kubelet's steps, those played


@dataclass(frozen=True, slots=True)
class TrialResult:
    pods: tuple[PodRun, ...]
    exchanges: tuple[Exchange, ...]
    runtime: Runtime | None = None  # the profile's runtime: what it applies of each reply


async def run_trial(pods: list[CriPod], config: BridgeConfig, document: dict[str, Any],
                    profile: RuntimeProfile, resizes: tuple[Resize, ...] = (),
                    node: NodeSpec | None = None) -> TrialResult:
    """Play `pods` through the bridge configured by `document` (already parsed as `config`)
    on `node`; each of `resizes` is played once every container is in place (kubelet's CRI
    UpdateContainerResources, the runtime's UpdateContainer event)."""
    async with TrialBridge(config, document) as bridge:
        return await bridge.trial(pods, profile, resizes, node)


class TrialBridge:
    """The relay and the bridge process for one configuration, for one trial or many in a row
    (`test` plays a suite's cases through one: starting a bridge is most of what a
    small case costs). Each trial has a simulated runtime of its own: it takes over the NRI
    socket path and the previous one goes, so the bridge reconnects at once (it watches the
    path for a new socket), registers and synchronizes afresh — the policies see an empty node
    again, their dry-run state taken anew from the real one — and the trial's exchanges and
    log lines are its own. Everything is stopped by its handle when the block ends.
    TrialError when the bridge cannot be started."""

    def __init__(self, config: BridgeConfig, document: dict[str, Any]) -> None:
        self._config, self._document = config, document
        self._stack = contextlib.AsyncExitStack()
        self._runtime: SimulatedRuntime | None = None
        self._proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> TrialBridge:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _start(self) -> None:
        work = self.work = Path(tempfile.mkdtemp(prefix="nri-try-"))
        self._stack.callback(shutil.rmtree, work, True)
        os.chmod(work, 0o700)
        try:
            self.relay = Relay(self._config.webhooks, str(work / "relay.sock"))
            bridge_config = work / "bridge.yaml"
            # The bridge reads the simulated node (bridge.trial.node_root), not the host's.
            relayed = relayed_document(self._document, self.relay.socket_path)
            relayed["node"] = {"sysfs_root": str(write_node(NodeSpec(), work / "node"))}
            bridge_config.write_text(yaml.safe_dump(relayed))
            await self.relay.start()
            self._stack.push_async_callback(self.relay.stop)
            self._stack.push_async_callback(self._stop_runtime)
            with (work / "bridge.out").open("wb") as out:
                self._proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "bridge", "run", "--nri-socket", str(work / "nri.sock"),
                    "--config", str(bridge_config), "--control-socket", "",
                    "--log-format", "json", "--log-file", str(work / "bridge.log"),
                    "--plugin-name", "try", stdin=asyncio.subprocess.DEVNULL, stdout=out,
                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
            self._stack.push_async_callback(stop_process, self._proc, BRIDGE_STOP_TIMEOUT_S)
            # Connected and synchronized before the first trial: a node of its own, which the
            # first trial's takes over as every later one does.
            self._runtime = SimulatedRuntime(work / "nri.sock", PROFILES[DEFAULT_PROFILE],
                                             request_timeout_s=REQUEST_TIMEOUT_S)
            await self._runtime.start()
            await _wait_plugin(self._runtime, self._proc, work)
        except (OSError, BridgeError, SimulatorError) as exc:
            raise TrialError(f"cannot run the trial: {exc}") from exc

    async def _stop_runtime(self) -> None:
        if self._runtime is not None:
            await self._runtime.stop()

    async def trial(self, pods: list[CriPod], profile: RuntimeProfile,
                    resizes: tuple[Resize, ...] = (), node: NodeSpec | None = None,
                    ) -> TrialResult:
        """Play `pods` on a fresh node (runtime) through this bridge; the bridge sees `node`'s
        CPUs, memory nodes and hugepages."""
        assert self._proc is not None, "use TrialBridge as an async context manager"
        write_node(node or NodeSpec(), self.work / "node")
        log = self.work / "bridge.log"
        first, offset = len(self.relay.exchanges), _size(log)
        self.relay.begin()
        runtime = SimulatedRuntime(self.work / "nri.sock", profile,
                                   request_timeout_s=REQUEST_TIMEOUT_S)
        try:
            # The new runtime's socket replaces the old one's before the old one closes the
            # bridge's connection: the bridge finds the new socket at once when it looks.
            await runtime.start()
            previous, self._runtime = self._runtime, runtime
            if previous is not None:  # always, but for a bridge that failed to start
                await previous.stop(unlink=False)
            await _wait_plugin(runtime, self._proc, self.work)
            runs = await _play_all(runtime, pods, profile, resizes)
        except (OSError, BridgeError, SimulatorError) as exc:
            raise TrialError(f"cannot run the trial: {exc}") from exc
        exchanges = with_crashes(self.relay.exchanges[first:])
        return TrialResult(tuple(runs), with_bridge_failures(exchanges, log, offset),
                           profile.runtime)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def with_crashes(exchanges: list[Exchange]) -> list[Exchange]:
    """`exchanges` with a reply that says a handler raised (bridge.reply_review.handler_crash)
    marked failed: a crash is a failed call, as a reply that is not JSON is."""
    out = []
    for ex in exchanges:
        crashed = crashes(ex.reply) if ex.error is None and ex.reply is not None else []
        out.append(replace(ex, error="; ".join(crashed)) if crashed else ex)
    return out


def with_bridge_failures(exchanges: list[Exchange], log: Path,
                         offset: int = 0) -> tuple[Exchange, ...]:
    """`exchanges` with the failures only the bridge saw: a reply it refused marks the exchange
    failed; a call it never made (circuit open, no budget left) becomes an exchange of its own,
    naming the pod and container the bridge's log names."""
    out = list(exchanges)
    by_uid = {(ex.bridge_uid, ex.webhook): i for i, ex in enumerate(out)}
    for line in _log_lines(log, offset):
        if line.get("msg") != CALL_FAILED:
            continue
        webhook, reason = str(line.get("webhook", "")), str(line.get("reason", ""))
        i = by_uid.get((str(line.get("uid", "")), webhook))
        if i is not None:
            if out[i].error is None:  # the relay passed the reply on; the bridge refused it
                out[i] = replace(out[i], error=f"the bridge refused the reply: {reason}")
            continue
        namespace, _, name = str(line.get("pod", "")).partition("/")
        request = {"event": line.get("event", ""), "pod": {"namespace": namespace, "name": name},
                   "container": {"id": line.get("container_id", ""),
                                 "name": line.get("container", "")}}
        out.append(Exchange(webhook, request, None, f"not called: {reason}"))
    return tuple(out)


def _log_lines(log: Path, offset: int = 0) -> list[dict[str, Any]]:
    """The bridge's JSON log lines from byte `offset` on (those of one trial)."""
    lines = []
    with contextlib.suppress(OSError):
        with log.open("rb") as f:
            f.seek(offset)
            content = f.read().decode(errors="replace")
        for text in content.splitlines():
            with contextlib.suppress(ValueError):
                line = json.loads(text)
                if isinstance(line, dict):
                    lines.append(line)
    return lines


def relayed_document(document: dict[str, Any], relay_socket: str) -> dict[str, Any]:
    """The user's bridge config with each webhook's URL pointing at the relay (path /<i>);
    TLS and the bearer token stay with the relay, which talks to the real webhook."""
    out = dict(document)
    hooks = []
    for i, hook in enumerate(document.get("webhooks") or []):
        hook = {k: v for k, v in hook.items()
                if k not in ("tls", "bearer_token_file", "allow_insecure_http")}
        hook["url"] = f"unix://{relay_socket}/{i}"
        # try counts every failure: the breaker must not skip calls.
        hook["circuit_breaker"] = {**(hook.get("circuit_breaker") or {}),
                                   "failure_threshold": MAX_FAILURE_THRESHOLD}
        hooks.append(hook)
    out["webhooks"] = hooks
    out.pop("control", None)
    return out


async def _wait_plugin(runtime: SimulatedRuntime, proc: asyncio.subprocess.Process,
                       work: Path) -> None:
    """Until the bridge is registered and synchronized, or has exited (whichever first)."""
    waiter = asyncio.ensure_future(runtime.wait_plugin(timeout_s=BRIDGE_START_TIMEOUT_S))
    exited = asyncio.ensure_future(proc.wait())
    try:
        await asyncio.wait({waiter, exited}, return_when=asyncio.FIRST_COMPLETED)
        if waiter.done():
            waiter.result()
            return
        raise TrialError(f"the bridge exited with code {proc.returncode}: "
                         + _tail(work / "bridge.out") + _tail(work / "bridge.log"))
    except TimeoutError:
        raise TrialError("the bridge did not connect to the simulated runtime within "
                         f"{BRIDGE_START_TIMEOUT_S:.0f}s: " + _tail(work / "bridge.log")) from None
    finally:
        for task in (waiter, exited):
            task.cancel()
        await asyncio.gather(waiter, exited, return_exceptions=True)


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return " | ".join(path.read_text(errors="replace").splitlines()[-5:])
    return ""


async def _play_all(runtime: SimulatedRuntime, pods: list[CriPod], profile: RuntimeProfile,
                    resizes: tuple[Resize, ...] = ()) -> list[PodRun]:
    """Every pod onto the node, each until its containers are in place, before any is torn
    down: a trial's pods share the node (exclusive CPUs run out as they would).
    Then each pod's last snapshots, and then the teardowns, pods in the order they came."""
    players = [_Player(runtime, pod, profile, i, resizes) for i, pod in enumerate(pods)]
    for player in players:
        await player.advance(lambda step: step.call == IN_PLACE)
        await player.skip()
    for player in players:
        await player.advance(lambda step: step.call != SNAPSHOT)
    for player in players:
        await player.advance(lambda step: False)
    return [player.run for player in players]


class _Player:
    """One pod in kubelet's order (bridge.kube.call_order) over the simulated runtime, played
    up to a step and held there."""

    def __init__(self, runtime: SimulatedRuntime, pod: CriPod, profile: RuntimeProfile,
                 index: int, resizes: tuple[Resize, ...] = ()) -> None:
        self.runtime = runtime
        self.resizes = resizes
        self.sandbox = pod_sandbox(pod, profile, index)
        self.run = PodRun(pod, self.sandbox.id)
        self.ctrs = {spec.name: container(pod, spec, self.sandbox, profile)
                     for spec in pod.containers}
        self.runs = {name: ContainerRun(pod, name, ctr.id) for name, ctr in self.ctrs.items()}
        self.run.containers = list(self.runs.values())
        self.order = kubelet_order(pod)
        self.step: CallStep | None = next(self.order)  # the next step; None once the pod is done
        self.running: list[str] = []  # started and not stopped, in kubelet's order
        self.resized = False

    async def advance(self, stop: Callable[[CallStep], bool]) -> None:
        """Perform steps until the next one satisfies `stop` (not performed) or none is left."""
        while self.step is not None and not stop(self.step):
            self._send(await self._perform(self.step))

    async def skip(self) -> None:
        if self.step is not None:
            self._send(True)

    def _send(self, ok: bool) -> None:
        try:
            self.step = self.order.send(ok)
        except StopIteration as done:
            self.step = None
            for name, why in done.value.items():
                self.runs[name].not_started = why

    async def _perform(self, step: CallStep) -> bool:
        if step.container is None:
            result = await run_cri(self.runtime, step.call, self.sandbox)
            if step.call == "RunPodSandbox":
                self.run.sandbox = result
            else:
                self.run.teardown.append(result)
            return result.ok
        # The container as the runtime has it now (adjusted, updated), before it exists the
        # one kubelet asks for.
        ctr = self.ctrs[step.container]
        current = self.runtime.state.containers.get(ctr.id, ctr)
        if step.call == SNAPSHOT:
            # The second snapshot is "every container in place" (bridge.kube.call_order): the
            # resize comes then, so replies can name every container of the pod.
            if self.runs[step.container].effective is not None and not self.resized:
                self.resized = True
                await self._resize()
                current = self.runtime.state.containers.get(ctr.id, current)
            self.runs[step.container].effective = effective(current)
            return True
        result = await run_cri(self.runtime, step.call, self.sandbox, current)
        self.runs[step.container].calls.append(result)
        if step.call == "StartContainer" and result.ok:
            self.running.append(step.container)
        elif step.call == "StopContainer" and step.container in self.running:
            self.running.remove(step.container)
        return result.ok

    async def _resize(self) -> None:
        """The pod's resizes in kubelet's steps (bridge.kube.resize.resize_steps), each container's
        values as kubelet asked for them (not as a plugin adjusted them); a failed call ends
        the resize, as kubelet stops there (it retries on a later sync)."""
        current = {name: KubeletView.of(self.ctrs[name].linux.resources)
                   for name in self.running}
        for step in resize_steps(current, self.resizes):
            self.run.resize.append(step)
            if step.container == POD or step.request is None:
                continue  # kubelet writes the pod cgroup itself: no CRI call, no NRI event
            ctr = self.ctrs[step.container]
            container = self.runtime.state.containers.get(ctr.id, ctr)
            result = await run_cri(self.runtime, RESIZE, self.sandbox, container,
                                   linux_resources=step.request.linux_resources())
            self.runs[step.container].calls.append(result)
            after = self.runtime.state.containers.get(ctr.id, container)
            self.runs[step.container].resize.append({
                "resource": step.resource, "kubelet": asdict(step.request),
                "resources": effective(after)["resources"],
                "ok": result.ok})
            if not result.ok:
                return
