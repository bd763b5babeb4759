"""Playing pods through the real bridge against the runtime simulator.

Owns: the run of `nri-webhook-bridge try`: a private directory with the relay
(bridge.trial.relay), the simulated runtime (bridge.simulator, over the real NRI socket
protocol), and the bridge as a real `nri-webhook-bridge run` process connected to it; then,
per pod, kubelet's CRI calls in kubelet's order (bridge.kube.call_order, which the test kit's
`send_pod` drives too) — RunPodSandbox; each init container created, started and (exited)
stopped before the next; sidecars created and started; the regular containers created and
started — each `--resize` of a container once it is in place (kubelet's CRI
UpdateContainerResources), a snapshot of what each container ends with, and the teardown.
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from bridge.config_file import BridgeConfig
from bridge.contract.runtime_effects import Runtime
from bridge.errors import BridgeError
from bridge.kube import SNAPSHOT, CriPod, container, effective, kubelet_order, pod_sandbox
from bridge.kube.resize import Resize
from bridge.runtime_facts.profiles import RuntimeProfile
from bridge.simulator.cri_calls import CriResult, run_cri
from bridge.simulator.runtime import SimulatedRuntime, SimulatorError
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
# The bridge's log line for every failed webhook call (bridge.webhooks.fanout).
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


@dataclass(slots=True)
class PodRun:
    pod: CriPod
    sandbox_id: str
    sandbox: CriResult | None = None
    containers: list[ContainerRun] = field(default_factory=list)
    teardown: list[CriResult] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TrialResult:
    pods: tuple[PodRun, ...]
    exchanges: tuple[Exchange, ...]
    runtime: Runtime | None = None  # the profile's runtime: what it applies of each reply


async def run_trial(pods: list[CriPod], config: BridgeConfig, document: dict[str, Any],
                    profile: RuntimeProfile, resizes: tuple[Resize, ...] = ()) -> TrialResult:
    """Play `pods` through the bridge configured by `document` (already parsed as `config`);
    each of `resizes` is played once its container is in place (kubelet's CRI
    UpdateContainerResources, the runtime's UpdateContainer event)."""
    work = Path(tempfile.mkdtemp(prefix="nri-try-"))
    os.chmod(work, 0o700)
    try:
        return await _run(work, pods, config, document, profile, resizes)
    except (OSError, BridgeError, SimulatorError) as exc:
        raise TrialError(f"cannot run the trial: {exc}") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _run(work: Path, pods: list[CriPod], config: BridgeConfig, document: dict[str, Any],
               profile: RuntimeProfile, resizes: tuple[Resize, ...]) -> TrialResult:
    relay = Relay(config.webhooks, str(work / "relay.sock"))
    bridge_config = work / "bridge.yaml"
    bridge_config.write_text(yaml.safe_dump(relayed_document(document, relay.socket_path)))
    runtime = SimulatedRuntime(work / "nri.sock", profile, request_timeout_s=REQUEST_TIMEOUT_S)
    log = work / "bridge.log"
    await relay.start()
    try:
        await runtime.start()
        proc: asyncio.subprocess.Process | None = None
        try:
            with (work / "bridge.out").open("wb") as out:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "bridge", "run", "--nri-socket", str(work / "nri.sock"),
                    "--config", str(bridge_config), "--control-socket", "",
                    "--log-format", "json", "--log-file", str(log), "--plugin-name", "try",
                    stdin=asyncio.subprocess.DEVNULL, stdout=out,
                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
            await _wait_plugin(runtime, proc, work)
            runs = [await _play(runtime, pod, profile, i, resizes) for i, pod in enumerate(pods)]
        finally:
            if proc is not None:
                await stop_process(proc, BRIDGE_STOP_TIMEOUT_S)
            await runtime.stop()
    finally:
        await relay.stop()
    return TrialResult(tuple(runs), with_bridge_failures(relay.exchanges, log), profile.runtime)


def with_bridge_failures(exchanges: list[Exchange], log: Path) -> tuple[Exchange, ...]:
    """`exchanges` with the failures only the bridge saw: a reply it refused marks the exchange
    failed; a call it never made (circuit open, no budget left) becomes an exchange of its own,
    naming the pod and container the bridge's log names."""
    out = list(exchanges)
    by_uid = {(ex.bridge_uid, ex.webhook): i for i, ex in enumerate(out)}
    for line in _log_lines(log):
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


def _log_lines(log: Path) -> list[dict[str, Any]]:
    lines = []
    with contextlib.suppress(OSError):
        for text in log.read_text(errors="replace").splitlines():
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
        # try counts every failure: the breaker must not skip calls (issue 25).
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


async def _play(runtime: SimulatedRuntime, pod: CriPod, profile: RuntimeProfile,
                index: int, resizes: tuple[Resize, ...] = ()) -> PodRun:
    """Drive kubelet's order (bridge.kube.call_order) over the simulated runtime."""
    sandbox = pod_sandbox(pod, profile, index)
    run = PodRun(pod, sandbox.id)
    ctrs = {spec.name: container(pod, spec, sandbox, profile) for spec in pod.containers}
    runs = {name: ContainerRun(pod, name, ctr.id) for name, ctr in ctrs.items()}
    run.containers = list(runs.values())
    order = kubelet_order(pod)
    step = next(order)
    while True:
        if step.container is None:
            result = await run_cri(runtime, step.call, sandbox)
            if step.call == "RunPodSandbox":
                run.sandbox = result
            else:
                run.teardown.append(result)
            ok = result.ok
        else:
            # The container as the runtime has it now (adjusted, updated), before it exists
            # the one kubelet asks for.
            ctr = ctrs[step.container]
            current = runtime.state.containers.get(ctr.id, ctr)
            if step.call == SNAPSHOT:
                # The second snapshot is "every container in place" (bridge.kube.call_order):
                # the resize comes then, so replies can name every container of the pod.
                in_place = runs[step.container].effective is not None
                for resize in (r for r in resizes if in_place and r.container == step.container):
                    result = await run_cri(runtime, RESIZE, sandbox, current,
                                           linux_resources=resize.linux_resources())
                    runs[step.container].calls.append(result)
                    current = runtime.state.containers.get(ctr.id, current)
                runs[step.container].effective = effective(current)
                ok = True
            else:
                result = await run_cri(runtime, step.call, sandbox, current)
                runs[step.container].calls.append(result)
                ok = result.ok
        try:
            step = order.send(ok)
        except StopIteration as done:
            for name, why in done.value.items():
                runs[name].not_started = why
            return run
