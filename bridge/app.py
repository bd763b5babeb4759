"""The bridge's composition: options -> handler -> plugin (+ control API), under one TaskGroup.

The plugin's whole handler chain is put together by bridge.nri.stub.new_plugin; this module
chooses what goes in it (the configured handler, the recording layer) and runs it beside the
control API.

With webhooks configured (config file, --policy-url, or — for a plugin the
runtime launches — the conf.d YAML it sends in Configure) the handler is the
WebhookHandler; without, the built-in static handler (bridge.configured). Stops on SIGTERM/SIGINT
(caught by the entry point, bridge.process_setup.stop_signals):
in-flight events get a bounded grace period to be answered, then the
connection is closed cleanly, the control API stops, HTTP clients close.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bridge.config_file import BridgeConfig
from bridge.configured import ConfiguredHandler, handler_kind
from bridge.control.api import ControlDeps, create_bridge_metrics_app, create_control_app
from bridge.control.serving import ControlServer
from bridge.control.settings import ControlSettings
from bridge.errors import BridgeError
from bridge.metrics import BridgeMetrics
from bridge.nri.cache import StateCache
from bridge.nri.runner import PluginRunner
from bridge.nri.session import PluginIdentity
from bridge.nri.static import StaticSettings
from bridge.nri.stub import Wrap, new_plugin
from bridge.process_setup import stop_signals
from bridge.proto.nri import api_pb2 as api
from bridge.record.recorder import Recorder, Redaction
from bridge.record.recording_handler import RecordingHandler
from bridge.webhooks.guard import Scope, parse_updates

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class RecordOptions:
    path: str
    redaction: Redaction


@dataclass(frozen=True, slots=True)
class RunOptions:
    identity: PluginIdentity
    socket_path: str
    fd: int | None
    config: BridgeConfig
    record: RecordOptions | None = None
    config_from_file: bool = False  # --config given: it wins over the runtime's string


def control_deps(runner: PluginRunner, metrics: BridgeMetrics,
                 config: BridgeConfig | None = None) -> ControlDeps:
    """What the control API may see and do, as callables (it imports neither side). Its
    updates are checked like a webhook's (bridge.webhooks.guard): the kinds and items of
    `updates.allow`, the QoS and node bounds, known containers; any container (no selector)."""
    config = config or BridgeConfig(static=StaticSettings())
    cache = runner.cache
    scope = Scope("UpdateContainers", config.control_allow, cache.knows_container,
                  lookup=cache.lookup, hugepages=config.node.hugepages,
                  node_cpus=config.node.node_cpus)

    def parse(items: Any) -> Sequence[api.ContainerUpdate]:
        return parse_updates(items, scope, "update")

    return ControlDeps(
        ready=lambda: runner.ready,
        pods=lambda: list(runner.cache.pods.values()),
        containers=lambda: list(runner.cache.containers.values()),
        parse_updates=parse,
        send_updates=runner.update_containers,
        metrics=metrics,
        stuck_calls=runner.calls.stuck,
    )


def watch_runner(metrics: BridgeMetrics, runner: PluginRunner) -> None:
    """Expose the runner's connection state and its calls to the runtime through the metrics
    (read at scrape time)."""
    metrics.watch_runner(lambda: runner.ready, lambda: runner.reconnects,
                         lambda: runner.deadline_misses)
    metrics.watch_loop(lambda: runner.in_flight, _task_count)
    metrics.watch_calls(runner.calls.stuck_now, lambda: runner.calls.became_stuck)


def _task_count() -> int:
    try:
        return len(asyncio.all_tasks())
    except RuntimeError:  # scraped outside the event loop (tests); the control API never is
        return 0


async def run_bridge(options: RunOptions) -> int:
    """Serve until the runner ends or a stop signal (bridge.process_setup.stop_signals, caught by
    the entry point) arrives; the latch stays in place throughout: the loop never owns the
    signals, so none is left to its default action while the loop starts or closes."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with stop_signals.waking(lambda: loop.call_soon_threadsafe(stop.set)):
        return await _serve(options, stop)


async def _serve(options: RunOptions, stop: asyncio.Event) -> int:
    metrics = BridgeMetrics()
    cache = StateCache()
    handler = ConfiguredHandler(options.config, metrics, from_file=options.config_from_file,
                                knows_container=cache.knows_container, lookup=cache.lookup)
    layers: list[Wrap] = []
    recorder = None
    if options.record is not None:
        recorder = opened = Recorder(options.record.path, options.record.redaction)
        layers.append(lambda inner: RecordingHandler(inner, opened))
    runner = new_plugin(options.identity, handler, layers=layers,
                        socket_path=options.socket_path, fd=options.fd, cache=cache,
                        updates=options.config.updates)
    watch_runner(metrics, runner)
    control = ControlServer(create_control_app(control_deps(runner, metrics, options.config)),
                            options.config.control)
    servers = [control]
    metrics_address = options.config.control.metrics_address
    if metrics_address is not None:
        # A second listener with its own app: only /metrics is reachable through it.
        control_settings = options.config.control
        servers.append(ControlServer(
            create_bridge_metrics_app(metrics),
            ControlSettings(socket_path=None, address=metrics_address,
                            header_timeout_s=control_settings.header_timeout_s,
                            idle_timeout_s=control_settings.idle_timeout_s,
                            max_connections=control_settings.max_connections),
            metrics_only=True))
    try:
        listening = control.open()
    except BridgeError as exc:
        log.error("cannot start the control API: %s", exc)
        return 1
    if metrics_address is not None:
        try:
            listening += [f"{where}/metrics" for where in servers[1].open()]
        except BridgeError as exc:
            control.close()
            log.error("cannot start the metrics listener (--metrics-address): %s", exc)
            return 1
    # Everything built so far (modules, the control app, the handler) lives as long as the
    # process: out of the collector's sight, a full collection no longer walks it (before, a
    # pause of tens of milliseconds every few thousand events:
    # docs/performance.md#numbers-behind-the-code).
    gc.collect()
    gc.freeze()
    log.info("starting", extra={
        "plugin": f"{options.identity.index}-{options.identity.name}",
        "socket": options.socket_path if options.fd is None else f"fd {options.fd}",
        "handler": handler_kind(handler.inner),
        "webhooks": [w.name for w in options.config.webhooks], "control": listening})
    try:
        async with asyncio.TaskGroup() as tasks:
            runner_task = tasks.create_task(runner.run(), name="nri-runner")
            for i, server in enumerate(servers):
                tasks.create_task(server.serve(), name="control-api" if i == 0 else "metrics")
            stop_task = tasks.create_task(stop.wait(), name="signals")
            stop_signals.checkpoint("serving")
            await asyncio.wait({runner_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set():
                log.info("shutting down")
                stop_signals.checkpoint("shutting-down")
                await runner.stop(SHUTDOWN_GRACE_S)
                runner_task.cancel()
            stop_task.cancel()
            for server in servers:
                server.stop()
    finally:
        await handler.aclose()
        if recorder is not None:
            recorder.close()
            log.info("recording closed", extra={"path": recorder.path.as_posix(),
                                                "written": recorder.written,
                                                "dropped": recorder.dropped})
    log.info("stopped")
    return 0
