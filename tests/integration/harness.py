"""Simulator + bridge (in-process PluginRunner with the webhook handler) + control API."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.app import control_deps, watch_runner
from bridge.control.api import create_control_app
from bridge.control.serving import ControlServer, wait_started
from bridge.control.settings import ControlSettings
from bridge.metrics import BridgeMetrics
from bridge.nri.cache import StateCache
from bridge.nri.runner import PluginRunner
from bridge.nri.session import PluginIdentity
from bridge.nri.stub import new_plugin
from bridge.proto.nri import api_pb2 as api
from bridge.simulator.runtime import SimulatedRuntime
from bridge.webhooks.specs import WebhookSpec, parse_webhooks
from bridge.webhooks.webhook_handler import WebhookHandler
from tests.bridge.simulator.harness import updates_for


@contextlib.contextmanager
def short_tmpdir() -> Any:
    """Unix socket paths must stay under ~108 bytes; pytest's tmp_path can be longer."""
    path = Path(tempfile.mkdtemp(prefix="nwb-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def webhook(policy_sock: Path, **kw: Any) -> WebhookSpec:
    doc = {"name": kw.pop("name", "policy"), "url": f"unix://{policy_sock}/v1/policy", **kw}
    return parse_webhooks([doc])[0]


@dataclass
class Bridge:
    runner: PluginRunner
    handler: WebhookHandler
    metrics: BridgeMetrics
    control_sock: Path


@contextlib.asynccontextmanager
async def running_bridge(rt: SimulatedRuntime, specs: Sequence[WebhookSpec], workdir: Path,
                         ) -> AsyncIterator[Bridge]:
    """Connect a bridge to `rt` and wait until it serves; control API on workdir/control.sock."""
    metrics = BridgeMetrics()
    cache = StateCache()
    handler = WebhookHandler(specs, metrics, knows_container=cache.knows_container,
                             lookup=cache.lookup)
    runner = new_plugin(PluginIdentity("webhook-bridge", "50"), handler,
                          socket_path=str(rt.socket_path), cache=cache, updates=updates_for(rt))
    watch_runner(metrics, runner)
    control_sock = workdir / "control.sock"
    control = ControlServer(create_control_app(control_deps(runner, metrics)),
                            ControlSettings(socket_path=str(control_sock), explicit_socket=True))
    control.open()
    async with asyncio.TaskGroup() as tasks:
        run_task = tasks.create_task(runner.run())
        control_task = tasks.create_task(control.serve())
        try:
            await rt.wait_plugin(5.0)
            await wait_started(control)
            yield Bridge(runner, handler, metrics, control_sock)
        finally:
            await runner.stop(1.0)
            run_task.cancel()
            control.stop()
            async with asyncio.timeout(5):
                await asyncio.gather(control_task, return_exceptions=True)
            await handler.aclose()


def pod_and_container(name: str = "ctr-0", namespace: str = "default",
                      ) -> tuple[api.PodSandbox, api.Container]:
    from bridge.simulator.synthetic import template
    pod, container = template()
    pod.namespace = namespace
    container.name = name
    container.id = (name.encode().hex() + container.id)[:64]
    return pod, container
