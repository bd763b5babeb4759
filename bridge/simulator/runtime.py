"""`SimulatedRuntime`: containerd's side of NRI over a real Unix socket.

Owns: composing the runtime's parts and its public face for tests, the demo, `try` and the
benchmarks: the socket (bridge.simulator.runtime_socket; `start()` listens, `stop()` closes every
plugin and the listener and removes the socket, after which `start()` may be called again, a
runtime restart), the plugins (bridge.simulator.plugin_registry), their handshake
(bridge.simulator.plugin_start), the events (bridge.simulator.event_runner), the pods and
containers (bridge.simulator.state) and the unsolicited updates it receives
(bridge.simulator.update_intake). Servers that live with the runtime's socket (`attached`: its
CRI socket, bridge.simulator.cri_server.serve_cri, composed outside this class) start after the
listener and stop before it. A reply that crashes the runtime closes the listener and every
plugin connection (the socket file stays, as a dead process leaves it) and nothing is served
until `start()`. Must not: decide anything those parts decide.

Plugins are taken one at a time, like the runtime does: accept -> wait for RegisterPlugin
(registration timeout) -> Configure (request timeout) -> validate the event mask -> Synchronize
(split into `more` chunks per profile) -> active. Only then is the next connection accepted.
On a profile whose NRI can deadlock on a plugin's UpdateContainers even outside handlers
(docs/protocol.md#unsolicited-updates-and-the-runtimes-locks), every such call is applied and
also kept in `unsafe_updates`, so a test can require that none came.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from google.protobuf.message import Message

from bridge.contract.catalogue import NriEvent
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.profiles import DEFAULT_PROFILE, RuntimeProfile, get_profile
from bridge.simulator.connection import PluginConnection
from bridge.simulator.default_validator import DefaultValidator
from bridge.simulator.delivery import Dispatcher, EventResult
from bridge.simulator.event_runner import EventRunner
from bridge.simulator.launched_plugin import PluginProcess
from bridge.simulator.plugin_registry import PluginRegistry
from bridge.simulator.plugin_start import PluginStarter
from bridge.simulator.runtime_socket import RuntimeSocket
from bridge.simulator.simulator_error import SimulatorError
from bridge.simulator.state import RuntimeState
from bridge.simulator.update_intake import UpdateIntake

log = logging.getLogger(__name__)


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
        self.config = config
        state = RuntimeState(self.profile.runtime)
        self._state = state
        # Unsolicited updates received, through UpdateContainers or CRI UpdateContainerResources
        # (the intake's lists, named here for tests).
        self.intake = UpdateIntake(self.profile)
        self.updates = self.intake.updates
        self.cri_updates = self.intake.cri_updates
        self.unsafe_updates = self.intake.unsafe_updates
        self.failed_updates = self.intake.failed_updates
        if default_validator is not None and not self.profile.knows(
                NriEvent.VALIDATE_CONTAINER_ADJUSTMENT):
            raise SimulatorError(f"{self.profile.key} has no default validator (NRI < v0.10)")
        self.registry = PluginRegistry()
        self.dispatcher = Dispatcher(self.profile, request_timeout_s, self.registry.close_plugin,
                                     lambda: self.registry.connections, default_validator)
        self.events = EventRunner(self.profile, self.dispatcher, self.registry, state,
                                  self._crashed, serialize_events=serialize_events)
        self.starter = PluginStarter(self.profile, self.registry, state, self.intake,
                                     self.events.event_lock, config=config,
                                     request_timeout_s=request_timeout_s,
                                     registration_timeout_s=registration_timeout_s)
        self.sync_updates = self.starter.sync_updates  # returned by Synchronize
        self.closed_plugins = self.registry.closed_plugins  # closed by the runtime, with why
        self.lost_plugins = self.registry.lost_plugins  # went away by themselves
        self._socket = RuntimeSocket(self.socket_path, self.starter.accept)

    @property
    def state(self) -> RuntimeState:
        """The runtime's pods and containers."""
        return self._state

    @state.setter
    def state(self, state: RuntimeState) -> None:
        """Swap the store (a benchmark's store that also writes a runc tree): the event runner
        and the plugin starter (Synchronize) see the new one too."""
        self._state = state
        self.events.state = state
        self.starter.state = state

    @property
    def running(self) -> bool:
        return self._socket.listening

    @property
    def crashed(self) -> str | None:
        """The panic that took the runtime down, until `start()`."""
        return self.events.crashed

    @property
    def connections(self) -> list[PluginConnection]:
        return self.registry.connections

    @property
    def plugins(self) -> list[PluginConnection]:
        """Active plugins in invocation order (ascending index)."""
        return self.registry.plugins

    async def start(self) -> None:
        if self._socket.listening:
            raise SimulatorError("runtime already started")
        self._socket.open()
        self.events.crashed = None
        for server in self.attached:
            await server.start()
            self._serving.append(server)
        log.info("simulated %s %s (NRI v%d.%d.%d) listening on %s", self.profile.runtime_name,
                 self.profile.runtime_version, *self.profile.nri, self.socket_path)

    async def stop(self, unlink: bool = True) -> None:
        """Close all plugins and the listener; `start()` may be called again. `unlink=False`
        leaves the socket path alone: another runtime has already taken it over."""
        serving, self._serving = self._serving, []
        for server in reversed(serving):
            await server.stop()
        await self._socket.close(unlink)
        await self.registry.stop()

    async def _crashed(self) -> None:
        await self._socket.close(unlink=False)
        self.registry.close_all("runtime crashed")

    async def wait_plugin(self, timeout_s: float = 10.0) -> PluginConnection:
        """The next plugin that completed register/configure/synchronize."""
        return await self.registry.wait_plugin(timeout_s)

    async def wait_updates(self, count: int = 1, timeout_s: float = 5.0,
                           ) -> list[api.ContainerUpdate]:
        """Wait until `count` unsolicited updates in total arrived (NRI or CRI)."""
        return await self.intake.wait(count, timeout_s)

    def launch(self, argv: Sequence[str], name: str, index: str) -> PluginProcess:
        """Start a pre-registered plugin the way the runtime does
        (bridge.simulator.launched_plugin); registration, Configure and Synchronize then run as
        for a plugin that connected to the socket. The caller owns the returned process (stop
        it by its PID)."""
        return self.starter.launch(argv, name, index)

    def note_cri_update(self, update: api.ContainerUpdate) -> None:
        """Record an update that came through CRI UpdateContainerResources."""
        self.intake.note_cri(update)

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
        return await self.events.run_event(event, pod, container, linux_resources=linux_resources,
                                           overhead_linux_resources=overhead_linux_resources)

    async def run_request(self, event: NriEvent | str, request: Message) -> EventResult:
        """Run a ready-made request message (scenarios use this)."""
        return await self.events.run_request(event, request)

    async def create_container(self, pod: api.PodSandbox, container: api.Container) -> EventResult:
        return await self.run_event(NriEvent.CREATE_CONTAINER, pod, container)

    async def update_container(self, pod: api.PodSandbox, container: api.Container,
                               linux_resources: api.LinuxResources) -> EventResult:
        return await self.run_event(NriEvent.UPDATE_CONTAINER, pod, container,
                                    linux_resources=linux_resources)

    async def stop_container(self, pod: api.PodSandbox, container: api.Container) -> EventResult:
        return await self.run_event(NriEvent.STOP_CONTAINER, pod, container)
