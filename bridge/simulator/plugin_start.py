"""Taking one plugin from its socket to active, and the runtime service it calls.

Owns: a connection's ttrpc trunk and the runtime service on it (RegisterPlugin, and
UpdateContainers applied under the runtime's lock through bridge.simulator.update_intake), the
registration timeout, Configure (its request goes out *before* the RegisterPlugin response,
docs/protocol.md#registration), the event mask, Synchronize (its updates kept in
`sync_updates`, as containerd only logs a failed one), and starting a launched plugin's process
the same way. Must not: listen on the socket (bridge.simulator.runtime_socket), keep the plugins'
record (bridge.simulator.plugin_registry) or deliver events (bridge.simulator.delivery).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Sequence

from bridge.contract.plugin_lifecycle import Phase, Step
from bridge.errors import RpcError
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.profiles import RuntimeProfile
from bridge.simulator.connection import (
    RUNTIME_SERVICE,
    PluginConnection,
    PluginFailed,
    PluginFatal,
    decode_message,
)
from bridge.simulator.handshake import (
    HandshakeFailed,
    accepted_mask,
    configure_request,
    identity_problem,
    synchronize,
)
from bridge.simulator.launched_plugin import PluginProcess, spawn_plugin
from bridge.simulator.plugin_registry import PluginRegistry
from bridge.simulator.state import RuntimeState
from bridge.simulator.update_intake import UpdateIntake
from bridge.transport.trunk import Trunk
from bridge.transport.ttrpc_server import MethodHandler
from bridge.wire import envelope, mux
from bridge.wire.status import Code

log = logging.getLogger(__name__)

EventLock = Callable[[], contextlib.AbstractAsyncContextManager[object]]


class PluginStarter:
    """Registers, configures and synchronizes the plugins of one runtime."""

    def __init__(self, profile: RuntimeProfile, registry: PluginRegistry, state: RuntimeState,
                 intake: UpdateIntake, event_lock: EventLock, *, config: str,
                 request_timeout_s: float, registration_timeout_s: float) -> None:
        self.profile = profile
        self.registry = registry
        self.state = state
        self.intake = intake
        self.event_lock = event_lock
        self.config = config
        self.request_timeout_s = request_timeout_s
        self.registration_timeout_s = registration_timeout_s
        self.sync_updates: list[api.ContainerUpdate] = []  # returned by Synchronize

    async def accept(self, sock: socket.socket) -> None:
        """Start the plugin that connected on `sock`; one bad plugin is closed, not raised."""
        conn = self.registry.new_connection()
        try:
            await self.start(conn, sock)
        except asyncio.CancelledError:
            conn.close("runtime stopped", by_runtime=False)
            raise
        except Exception as exc:  # task boundary: one bad plugin must not stop accepting
            log.exception("starting plugin %s failed", conn.label)
            self.registry.close_plugin(conn, f"internal error: {exc}")
        finally:
            if conn.trunk is None:
                sock.close()  # never handed to a transport

    def launch(self, argv: Sequence[str], name: str, index: str) -> PluginProcess:
        """Start a pre-registered plugin's process (bridge.simulator.launched_plugin) and its
        handshake as for a plugin that connected to the socket; the caller owns the process."""
        ours, proc = spawn_plugin(argv, name, index)
        conn = self.registry.new_connection()
        self.registry.keep(asyncio.get_running_loop().create_task(
            self.start(conn, ours), name=f"sim:launch#{conn.seq}"))
        return proc

    async def start(self, conn: PluginConnection, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        _, trunk = await loop.connect_accepted_socket(
            lambda: Trunk(server_conn=mux.RUNTIME_SERVICE_CONN, client_conn=mux.PLUGIN_SERVICE_CONN,
                          services=self._runtime_service(conn), name=f"sim#{conn.seq}"),
            sock)
        conn.trunk = trunk
        self.registry.keep(loop.create_task(self.registry.watch(conn, trunk),
                                            name=f"sim:watch#{conn.seq}"))
        try:
            async with asyncio.timeout(self.registration_timeout_s):
                await asyncio.shield(conn.registered)
        except TimeoutError:
            self.registry.close_plugin(conn, "plugin registration timed out "
                                             f"({self.registration_timeout_s * 1000:.0f} ms)")
            return
        except PluginFatal:
            return  # refused or gone; already recorded
        assert conn.configure_task is not None
        try:
            events = await conn.configure_task
        except (PluginFatal, PluginFailed) as exc:
            self.registry.close_plugin(conn, f"failed to configure plugin: {exc}")
            return
        try:
            conn.events = accepted_mask(self.profile, events)
        except HandshakeFailed as exc:
            self.registry.close_plugin(conn, str(exc))
            return
        conn.advance(Step.CONFIGURE)
        async with self.event_lock():
            synchronized = await self._synchronize(conn)
        if synchronized and conn.state is Phase.CONFIGURED:
            conn.advance(Step.SYNCHRONIZE)
            log.info("plugin %s active (events 0x%04x)", conn.label, conn.events)
            self.registry.activated(conn)

    def _runtime_service(self, conn: PluginConnection) -> dict[str, dict[str, MethodHandler]]:
        async def register_plugin(request: envelope.Request) -> bytes:
            return await self._register_plugin(conn, request)

        async def update_containers(request: envelope.Request) -> bytes:
            return await self._update_containers(conn, request)

        return {RUNTIME_SERVICE: {"RegisterPlugin": register_plugin,
                                  "UpdateContainers": update_containers}}

    async def _register_plugin(self, conn: PluginConnection, request: envelope.Request) -> bytes:
        req = decode_message(api.RegisterPluginRequest, request.payload, RpcError)
        if conn.state is not Phase.CONNECTED:
            raise RpcError(Code.FAILED_PRECONDITION, f"plugin {conn.label} already registered")
        problem = identity_problem(self.profile, req.plugin_name, req.plugin_idx)
        if problem is not None:
            # Error status first, then the close (scheduled after the reply is written).
            asyncio.get_running_loop().call_soon(
                self.registry.close_plugin, conn, f"invalid plugin registration: {problem}")
            raise RpcError(Code.UNKNOWN, problem)
        conn.name, conn.index = req.plugin_name, req.plugin_idx
        conn.advance(Step.REGISTER_PLUGIN)
        # The runtime marks the plugin registered and starts Configure before it
        # answers RegisterPlugin (docs/protocol.md#registration): emulate that order exactly. The
        # task's first step writes the Configure request; sleep(0) lets it run.
        conn.configure_task = asyncio.get_running_loop().create_task(
            self._configure(conn), name=f"sim:configure#{conn.seq}")
        conn.registered.set_result(None)
        await asyncio.sleep(0)
        log.info("plugin %s registered", conn.label)
        return b""

    async def _configure(self, conn: PluginConnection) -> int:
        request = configure_request(self.profile, self.config, self.registration_timeout_s,
                                    self.request_timeout_s)
        payload = await conn.call("Configure", request.SerializeToString(),
                                  self.request_timeout_s)
        return int(decode_message(api.ConfigureResponse, payload).events)

    async def _synchronize(self, conn: PluginConnection) -> bool:
        pods, containers = self.state.snapshot()
        try:
            updates = await synchronize(conn, self.profile, pods, containers,
                                        self.request_timeout_s)
        except HandshakeFailed as exc:
            self.registry.close_plugin(conn, str(exc))
            return False
        for update in updates:
            self.sync_updates.append(update)
            if not self.state.apply_update(update):  # containerd only logs these
                log.info("sync update of %s by %s failed", update.container_id, conn.label)
        return True

    async def _update_containers(self, conn: PluginConnection, request: envelope.Request) -> bytes:
        req = decode_message(api.UpdateContainersRequest, request.payload, RpcError)
        if conn.state in (Phase.CONNECTED, Phase.CLOSED):
            raise RpcError(Code.FAILED_PRECONDITION, "plugin not registered")
        self.intake.note_call(conn.label, len(req.update))
        async with self.event_lock():
            failed = self.intake.apply(req.update, self.state)
        if any(not u.ignore_failure for u in failed):
            # ttrpc drops the payload on error: the plugin never sees `failed`.
            raise RpcError(Code.UNKNOWN, "NRI update of some containers failed")
        return b""
