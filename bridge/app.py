"""Composition root: options -> handler -> plugin runner, under one TaskGroup.

Handles SIGTERM/SIGINT: in-flight events get a bounded grace period to be
answered, then the connection is closed cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass

from bridge.config import BridgeConfig
from bridge.nri.handler import Handler
from bridge.nri.runner import PluginRunner
from bridge.nri.service import ServiceOptions
from bridge.nri.session import PluginIdentity
from bridge.nri.static import StaticHandler

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class RunOptions:
    identity: PluginIdentity
    socket_path: str
    fd: int | None
    config: BridgeConfig


def build_handler(config: BridgeConfig) -> Handler:
    return StaticHandler(config.static)


async def run(options: RunOptions) -> int:
    handler = build_handler(options.config)
    runner = PluginRunner(options.identity, handler, socket_path=options.socket_path,
                          fd=options.fd, options=ServiceOptions())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    log.info("starting", extra={"plugin": f"{options.identity.index}-{options.identity.name}",
                                "socket": options.socket_path if options.fd is None
                                else f"fd {options.fd}"})
    async with asyncio.TaskGroup() as tasks:
        runner_task = tasks.create_task(runner.run(), name="nri-runner")
        stop_task = tasks.create_task(stop.wait(), name="signals")
        await asyncio.wait({runner_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            log.info("shutting down")
            await runner.stop(SHUTDOWN_GRACE_S)
            runner_task.cancel()
        stop_task.cancel()
    log.info("stopped")
    return 0
