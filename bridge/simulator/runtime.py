"""`SimulatedRuntime`: containerd's side of NRI over a real Unix socket.

The socket (docs/protocol.md#external-plugins): `start()` deletes a stale socket,
creates the parent directory with mode 0700 and listens; `stop()` closes every
plugin and the listener and removes the socket, after which `start()` may be
called again (runtime restart).

Plugins are taken one at a time, like the runtime does: accept -> wait for
RegisterPlugin (registration timeout) -> Configure (request timeout; the
Configure request goes out *before* the RegisterPlugin response, protocol
docs/protocol.md#registration) -> validate the event mask -> Synchronize (split into `more` chunks
per profile) -> active. Only then is the next connection accepted.

Events, Synchronize and UpdateContainers share one lock, as in containerd
(docs/protocol.md#updatecontainers-and-the-runtimes-lock), so a plugin that awaits UpdateContainers
inside an event handler deadlocks until the request timeout closes it, as it would for real.
On a profile whose NRI can deadlock on a plugin's UpdateContainers even outside handlers
(docs/protocol.md#unsolicited-updates-and-the-runtimes-locks), every such call is applied and
also kept in `unsafe_updates`, so a test can require that none came (the updates a runtime
receives are kept by bridge.simulator.update_intake). Servers that live with the runtime's
socket (`attached`: its CRI socket, bridge.simulator.cri_server.serve_cri, composed outside this
class) start after the listener and stop before it.

A plugin response that sets off one of the profile's hazards
(docs/protocol.md#reply-fields-that-crash-a-runtime) crashes the runtime as it would for real:
the operation fails with `runtime crashed: <panic>`, every plugin connection and the listener
close (the socket file stays, as a dead process leaves it), `crashed` says why, and nothing is
served until `start()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from google.protobuf.message import Message

from bridge.contract.catalogue import EVENTS_BY_RPC, NriEvent
from bridge.contract.plugin_lifecycle import Phase, Step
from bridge.errors import RpcError
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.profiles import DEFAULT_PROFILE, RuntimeProfile, get_profile
from bridge.simulator.connection import (
    RUNTIME_SERVICE,
    PluginConnection,
    PluginFailed,
    PluginFatal,
    decode_message,
)
from bridge.simulator.default_validator import DefaultValidator
from bridge.simulator.delivery import Dispatcher, EventResult
from bridge.simulator.event_request import event_request
from bridge.simulator.handshake import (
    HandshakeFailed,
    accepted_mask,
    configure_request,
    identity_problem,
    synchronize,
)
from bridge.simulator.launched_plugin import spawn_plugin
from bridge.simulator.result_merge import RuntimeCrashed
from bridge.simulator.simulator_error import SimulatorError
from bridge.simulator.state import RuntimeState
from bridge.simulator.update_intake import UpdateIntake
from bridge.transport.trunk import Trunk
from bridge.transport.ttrpc_server import MethodHandler
from bridge.wire import envelope, mux
from bridge.wire.status import Code

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 16
CLOSE_WAIT_S = 2.0


class Attached(Protocol):
    """A server started and stopped with the runtime's socket."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class SimulatedRuntime:
    """A runtime that plugins connect to; see the module docstring."""

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        profile: RuntimeProfile | str = DEFAULT_PROFILE,
        *,
        request_timeout_s: float = 2.0,
        registration_timeout_s: float = 5.0,
        serialize_events: bool = True,
        config: str = "",
        default_validator: DefaultValidator | None = None,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.cri_socket: Path | None = None  # set by bridge.simulator.cri_server.serve_cri
        self.attached: list[Attached] = []
        self._serving: list[Attached] = []
        self.profile = get_profile(profile) if isinstance(profile, str) else profile
        self.request_timeout_s = request_timeout_s
        self.registration_timeout_s = registration_timeout_s
        self.serialize_events = serialize_events
        self.config = config
        self.state = RuntimeState(self.profile.runtime)
        # Unsolicited updates received, through UpdateContainers or CRI UpdateContainerResources
        # (the intake's lists, named here for tests).
        self.intake = UpdateIntake(self.profile)
        self.updates = self.intake.updates
        self.cri_updates = self.intake.cri_updates
        self.unsafe_updates = self.intake.unsafe_updates
        self.failed_updates = self.intake.failed_updates
        self.sync_updates: list[api.ContainerUpdate] = []  # returned by Synchronize
        self.closed_plugins: list[tuple[str, str]] = []  # closed by the runtime, with why
        self.lost_plugins: list[tuple[str, str]] = []  # went away by themselves
        self.connections: list[PluginConnection] = []
        self.crashed: str | None = None  # the panic that took the runtime down, until start()
        if default_validator is not None and not self.profile.knows(
                NriEvent.VALIDATE_CONTAINER_ADJUSTMENT):
            raise SimulatorError(f"{self.profile.key} has no default validator (NRI < v0.10)")
        self.dispatcher = Dispatcher(self.profile, request_timeout_s, self._close_plugin,
                                     lambda: self.connections, default_validator)
        self._lock = asyncio.Lock()
        self._ready: asyncio.Queue[PluginConnection] = asyncio.Queue()
        self._listener: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._watchers: set[asyncio.Task[None]] = set()
        self._seq = 0

    # -- socket lifecycle ---------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._listener is not None

    @property
    def plugins(self) -> list[PluginConnection]:
        """Active plugins in invocation order (ascending index)."""
        return sorted((c for c in self.connections if c.is_active),
                      key=lambda c: (c.index, c.seq))

    async def start(self) -> None:
        if self._listener is not None:
            raise SimulatorError("runtime already started")
        path = self.socket_path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(path.lstat().st_mode):
                path.unlink()  # a stale socket from an earlier run
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(path))
            listener.listen(LISTEN_BACKLOG)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self.crashed = None
        self._accept_task = asyncio.get_running_loop().create_task(
            self._accept_loop(listener), name="sim:accept")
        for server in self.attached:
            await server.start()
            self._serving.append(server)
        log.info("simulated %s %s (NRI v%d.%d.%d) listening on %s", self.profile.runtime_name,
                 self.profile.runtime_version, *self.profile.nri, path)

    async def stop(self, unlink: bool = True) -> None:
        """Close all plugins and the listener; `start()` may be called again. `unlink=False`
        leaves the socket path alone: another runtime has already taken it over."""
        serving, self._serving = self._serving, []
        for server in reversed(serving):
            await server.stop()
        task, self._accept_task = self._accept_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
            if unlink:
                with contextlib.suppress(FileNotFoundError):
                    self.socket_path.unlink()
        trunks = [c.trunk for c in self.connections if c.trunk is not None]
        for conn in self.connections:
            conn.close("runtime stopped", by_runtime=False)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_WAIT_S):
                await asyncio.gather(*(t.wait_closed() for t in trunks))
        watchers = list(self._watchers)
        for watcher in watchers:
            watcher.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        self.connections = [c for c in self.connections if not c.lifecycle.closed]

    async def wait_plugin(self, timeout_s: float = 10.0) -> PluginConnection:
        """The next plugin that completed register/configure/synchronize."""
        async with asyncio.timeout(timeout_s):
            while True:
                conn = await self._ready.get()
                if conn.is_active:
                    return conn

    async def wait_updates(self, count: int = 1, timeout_s: float = 5.0,
                           ) -> list[api.ContainerUpdate]:
        """Wait until `count` unsolicited updates in total arrived (NRI or CRI)."""
        return await self.intake.wait(count, timeout_s)

    async def _accept_loop(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            sock, _ = await loop.sock_accept(listener)
            self._seq += 1
            conn = PluginConnection(self._seq)
            self.connections.append(conn)
            try:
                await self._start_plugin(conn, sock)
            except asyncio.CancelledError:
                conn.close("runtime stopped", by_runtime=False)
                raise
            except Exception as exc:  # task boundary: one bad plugin must not stop accepting
                log.exception("starting plugin %s failed", conn.label)
                self._close_plugin(conn, f"internal error: {exc}")
            finally:
                if conn.trunk is None:
                    sock.close()  # never handed to a transport

    def launch(self, argv: Sequence[str], name: str, index: str) -> subprocess.Popen[bytes]:
        """Start a pre-registered plugin the way the runtime does
        (bridge.simulator.launched_plugin); registration, Configure and Synchronize then run as
        for a plugin that connected to the socket. The caller owns the returned process (stop
        it by its PID)."""
        ours, proc = spawn_plugin(argv, name, index)
        self._seq += 1
        conn = PluginConnection(self._seq)
        self.connections.append(conn)
        task = asyncio.get_running_loop().create_task(self._start_plugin(conn, ours),
                                                      name=f"sim:launch#{conn.seq}")
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)
        return proc

    # -- plugin start: register, configure, synchronize -----------------------------------

    async def _start_plugin(self, conn: PluginConnection, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        _, trunk = await loop.connect_accepted_socket(
            lambda: Trunk(server_conn=mux.RUNTIME_SERVICE_CONN, client_conn=mux.PLUGIN_SERVICE_CONN,
                          services=self._runtime_service(conn), name=f"sim#{conn.seq}"),
            sock)
        conn.trunk = trunk
        watcher = loop.create_task(self._watch(conn, trunk), name=f"sim:watch#{conn.seq}")
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        try:
            async with asyncio.timeout(self.registration_timeout_s):
                await asyncio.shield(conn.registered)
        except TimeoutError:
            self._close_plugin(conn, "plugin registration timed out "
                                     f"({self.registration_timeout_s * 1000:.0f} ms)")
            return
        except PluginFatal:
            return  # refused or gone; already recorded
        assert conn.configure_task is not None
        try:
            events = await conn.configure_task
        except (PluginFatal, PluginFailed) as exc:
            self._close_plugin(conn, f"failed to configure plugin: {exc}")
            return
        try:
            conn.events = accepted_mask(self.profile, events)
        except HandshakeFailed as exc:
            self._close_plugin(conn, str(exc))
            return
        conn.advance(Step.CONFIGURE)
        async with self._event_lock():
            synchronized = await self._synchronize(conn)
        if synchronized and conn.state is Phase.CONFIGURED:
            conn.advance(Step.SYNCHRONIZE)
            log.info("plugin %s active (events 0x%04x)", conn.label, conn.events)
            self._ready.put_nowait(conn)

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
                self._close_plugin, conn, f"invalid plugin registration: {problem}")
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
            self._close_plugin(conn, str(exc))
            return False
        for update in updates:
            self.sync_updates.append(update)
            if not self.state.apply_update(update):  # containerd only logs these
                log.info("sync update of %s by %s failed", update.container_id, conn.label)
        return True

    # -- UpdateContainers (plugin -> runtime) -------------------------------------------

    async def _update_containers(self, conn: PluginConnection, request: envelope.Request) -> bytes:
        req = decode_message(api.UpdateContainersRequest, request.payload, RpcError)
        if conn.state in (Phase.CONNECTED, Phase.CLOSED):
            raise RpcError(Code.FAILED_PRECONDITION, "plugin not registered")
        self.intake.note_call(conn.label, len(req.update))
        async with self._event_lock():
            failed = self.intake.apply(req.update, self.state)
        if any(not u.ignore_failure for u in failed):
            # ttrpc drops the payload on error: the plugin never sees `failed`.
            raise RpcError(Code.UNKNOWN, "NRI update of some containers failed")
        return b""

    def note_cri_update(self, update: api.ContainerUpdate) -> None:
        """Record an update that came through CRI UpdateContainerResources."""
        self.intake.note_cri(update)

    # -- events -------------------------------------------------------------------------

    async def run_event(
        self,
        event: NriEvent | str,
        pod: api.PodSandbox,
        container: api.Container | None = None,
        *,
        linux_resources: api.LinuxResources | None = None,
        overhead_linux_resources: api.LinuxResources | None = None,
    ) -> EventResult:
        """Run one lifecycle event through every subscribed plugin."""
        request = event_request(self._event(event), pod, container,
                                linux_resources=linux_resources,
                                overhead_linux_resources=overhead_linux_resources)
        return await self.run_request(event, request)

    async def run_request(self, event: NriEvent | str, request: Message) -> EventResult:
        """Run a ready-made request message (scenarios use this)."""
        kind = self._event(event)
        async with self._event_lock():
            try:
                result = await self.dispatcher.run(kind, self.plugins, request)
            except RuntimeCrashed as exc:
                return await self._crash(kind, str(exc))
            if result.ok:
                self._fold(kind, request, result)
        return result

    async def create_container(self, pod: api.PodSandbox, container: api.Container) -> EventResult:
        return await self.run_event(NriEvent.CREATE_CONTAINER, pod, container)

    async def update_container(self, pod: api.PodSandbox, container: api.Container,
                               linux_resources: api.LinuxResources) -> EventResult:
        return await self.run_event(NriEvent.UPDATE_CONTAINER, pod, container,
                                    linux_resources=linux_resources)

    async def stop_container(self, pod: api.PodSandbox, container: api.Container) -> EventResult:
        return await self.run_event(NriEvent.STOP_CONTAINER, pod, container)

    def _fold(self, event: NriEvent, request: Message, result: EventResult) -> None:
        pod = getattr(request, "pod", None)
        container = result.container
        self.state.observe(event, pod, container)
        if event is NriEvent.UPDATE_CONTAINER and container is not None:
            current = self.state.containers.get(container.id)
            if current is not None:
                current.linux.resources.CopyFrom(container.linux.resources)
        for update in result.updates:  # a reply's updates of other containers
            if not self.state.apply_reply_update(update):
                log.info("%s: update of %s failed", event.rpc_name, update.container_id)

    def _event(self, event: NriEvent | str) -> NriEvent:
        if isinstance(event, str):
            try:
                event = EVENTS_BY_RPC[event]
            except KeyError:
                raise SimulatorError(f"unknown event {event!r}") from None
        if event is NriEvent.VALIDATE_CONTAINER_ADJUSTMENT:
            raise SimulatorError("validation runs as part of CreateContainer")
        if self.crashed is not None:
            raise SimulatorError(f"{self.profile.key} crashed: {self.crashed}")
        if not self.dispatcher.supports(event):
            raise SimulatorError(f"{self.profile.key} has no {event.rpc_name} "
                                 f"(NRI v{'.'.join(map(str, self.profile.nri))})")
        return event

    # -- helpers ------------------------------------------------------------------------

    def _event_lock(self) -> contextlib.AbstractAsyncContextManager[object]:
        if self.serialize_events:
            return self._lock
        return contextlib.nullcontext()

    async def _crash(self, event: NriEvent, panic: str) -> EventResult:
        """The runtime process dies: no listener, no plugins (see the module docstring)."""
        log.error("simulated %s %s crashed during %s: %s", self.profile.runtime_name,
                  self.profile.runtime_version, event.rpc_name, panic)
        self.crashed = panic
        task, self._accept_task = self._accept_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        for conn in self.connections:
            conn.close("runtime crashed", by_runtime=False)
        return EventResult(event.rpc_name, 0.0, error=f"runtime crashed: {panic}")

    def _close_plugin(self, conn: PluginConnection, reason: str) -> None:
        if conn.close(reason):
            log.warning("closing plugin %s: %s", conn.label, reason)
            self.closed_plugins.append((conn.label, reason))

    async def _watch(self, conn: PluginConnection, trunk: Trunk) -> None:
        await trunk.wait_closed()
        if conn.close(trunk.close_reason or "connection closed", by_runtime=False):
            log.info("plugin %s disconnected: %s", conn.label, conn.close_reason)
            self.lost_plugins.append((conn.label, conn.close_reason))
