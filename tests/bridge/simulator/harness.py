"""Loopback helpers: the runtime simulator and a plugin over a real Unix socket.

`connected(...)` starts a SimulatedRuntime, runs the lead's PluginRunner with a
test handler against it, waits until the plugin is active, and on exit stops
both and checks that no task was leaked. `RawPlugin` is a hand-made plugin on
the shared Trunk for behaviour our plugin core never shows (Unimplemented
answers, silence, wrong `more` answers, bad masks).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.call_watch import CallWatch
from bridge.nri.handler_api import Handler
from bridge.nri.runner import Backoff, PluginRunner
from bridge.nri.session import PluginIdentity
from bridge.nri.stub import new_plugin
from bridge.nri.update_routes import UpdateSettings
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import SimulatedRuntime
from bridge.simulator.connection import PLUGIN_SERVICE, RUNTIME_SERVICE, PluginConnection
from bridge.simulator.cri_server import serve_cri
from bridge.transport.trunk import Trunk
from bridge.wire import envelope, mux
from tests.waiting import until

FAST_BACKOFF = Backoff(initial_s=0.05, factor=2.0, max_s=0.2)


def _leaked_tasks() -> set[asyncio.Task[Any]]:
    current = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t is not current and not t.done()}


async def assert_no_leaked_tasks() -> None:
    # Cancelled tasks need a few loop turns (and closing sockets a moment) to finish; the
    # 5 s bound only catches a task that never ends, however busy the machine.
    await until(lambda: not _leaked_tasks(), what="every task the test started has ended",
                timeout_s=5, interval_s=0.01,
                details=lambda: f"leaked tasks: {[t.get_name() for t in _leaked_tasks()]}")


def cri_socket_beside(nri_socket: Path) -> Path:
    return nri_socket.with_name(nri_socket.name + ".cri")


def updates_for(runtime: SimulatedRuntime) -> UpdateSettings:
    """The bridge's update settings for `runtime`: its CRI socket, if it serves one."""
    cri = runtime.cri_socket
    return UpdateSettings(cri_socket=str(cri) if cri is not None else None)


@dataclass
class Harness:
    runtime: SimulatedRuntime
    runner: PluginRunner
    conn: PluginConnection
    task: asyncio.Task[None]


@contextlib.asynccontextmanager
async def connected(path: Path, handler: Handler, profile: str = "containerd-2.1.9", *,
                    name: str = "test", index: str = "10", wait_s: float = 5.0,
                    seed: Callable[[SimulatedRuntime], None] | None = None,
                    updates: UpdateSettings | None = None,
                    calls: CallWatch | None = None,
                    **runtime_kwargs: Any) -> AsyncIterator[Harness]:
    # Like a real runtime, the simulated one serves CRI beside NRI: the bridge sends its
    # updates there on profiles where NRI UpdateContainers can deadlock.
    cri_socket = runtime_kwargs.pop("cri_socket", cri_socket_beside(path))
    runtime = SimulatedRuntime(path, profile, **runtime_kwargs)
    if cri_socket is not None:
        serve_cri(runtime, cri_socket)
    if seed is not None:
        seed(runtime)
    await runtime.start()
    runner = new_plugin(PluginIdentity(name, index), handler, socket_path=str(path),
                          backoff=FAST_BACKOFF, updates=updates or updates_for(runtime),
                          calls=calls)
    task = asyncio.create_task(runner.run(), name="test:runner")
    try:
        conn = await runtime.wait_plugin(wait_s)
        yield Harness(runtime, runner, conn, task)
    finally:
        await runner.stop(grace_s=0.2)
        await runtime.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await assert_no_leaked_tasks()


RawMethod = Callable[[envelope.Request], Awaitable[bytes]]


class RawPlugin:
    """A minimal hand-made plugin: only the methods it is given, nothing else.

    Methods missing from `methods` are answered Unimplemented by the shared
    ttrpc server (`method X`). Every request is recorded in `calls`.
    """

    def __init__(self, path: Path, methods: dict[str, RawMethod] | None = None, *,
                 events: int = 0x08) -> None:
        self.path = path
        self.events = events
        self.calls: list[tuple[str, bytes]] = []
        self.trunk: Trunk | None = None
        table: dict[str, RawMethod] = {
            "Configure": self._configure,
            "Synchronize": self._synchronize,
        }
        table.update(methods or {})
        self.methods = {name: self._recorded(name, fn) for name, fn in table.items()}

    def _recorded(self, name: str, fn: RawMethod) -> RawMethod:
        async def serve(request: envelope.Request) -> bytes:
            self.calls.append((name, request.payload))
            return await fn(request)
        return serve

    async def _configure(self, request: envelope.Request) -> bytes:
        return api.ConfigureResponse(events=self.events).SerializeToString()

    async def _synchronize(self, request: envelope.Request) -> bytes:
        req = api.SynchronizeRequest()
        req.ParseFromString(request.payload)
        return api.SynchronizeResponse(more=req.more).SerializeToString()

    def called(self, name: str) -> list[bytes]:
        return [payload for method, payload in self.calls if method == name]

    async def connect(self) -> Trunk:
        loop = asyncio.get_running_loop()
        _, trunk = await loop.create_unix_connection(
            lambda: Trunk(server_conn=mux.PLUGIN_SERVICE_CONN,
                          client_conn=mux.RUNTIME_SERVICE_CONN,
                          services={PLUGIN_SERVICE: self.methods}, name="raw-plugin"),
            str(self.path))
        self.trunk = trunk
        return trunk

    async def register(self, name: str = "raw", index: str = "05") -> None:
        assert self.trunk is not None
        request = api.RegisterPluginRequest(plugin_name=name, plugin_idx=index)
        await self.trunk.client.call(RUNTIME_SERVICE, "RegisterPlugin",
                                     request.SerializeToString(), timeout_s=5.0)

    async def update_containers(self, updates: list[api.ContainerUpdate],
                                timeout_s: float = 5.0) -> bytes:
        assert self.trunk is not None
        request = api.UpdateContainersRequest(update=updates)
        return await self.trunk.client.call(RUNTIME_SERVICE, "UpdateContainers",
                                            request.SerializeToString(), timeout_s=timeout_s,
                                            send_timeout=False)

    async def close(self) -> None:
        if self.trunk is not None:
            self.trunk.close("test done")
            await self.trunk.wait_closed()


@contextlib.asynccontextmanager
async def raw_connected(path: Path, plugin: RawPlugin, profile: str = "nri-v0.12", *,
                        name: str = "raw", index: str = "05",
                        **runtime_kwargs: Any) -> AsyncIterator[tuple[SimulatedRuntime,
                                                                       PluginConnection]]:
    runtime = SimulatedRuntime(path, profile, **runtime_kwargs)
    await runtime.start()
    try:
        await plugin.connect()
        await plugin.register(name, index)
        conn = await runtime.wait_plugin(5.0)
        yield runtime, conn
    finally:
        await plugin.close()
        await runtime.stop()
        await assert_no_leaked_tasks()
