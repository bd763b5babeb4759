"""The simulated runtime's CRI socket: UpdateContainerResources and Version, over real gRPC.

A plugin on a runtime where NRI UpdateContainers can deadlock changes containers through CRI
(docs/protocol.md#unsolicited-updates-and-the-runtimes-locks); so the simulated runtime serves
the CRI calls the bridge makes, the way containerd does: UpdateContainerResources runs the
runtime's own NRI UpdateContainer (and PostUpdateContainer) event through every plugin, under
the runtime's event lock, and the container ends with the result.

Owns: the gRPC server (grpcio, its own threads) and the hop from its threads onto the
simulator's event loop. Must not: decide what an update does to a container (the events and
the runtime's fold do).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from bridge.contract.cri_service import (
    CRI_API_VERSION,
    METHODS,
    SERVICE,
    to_nri,
)
from bridge.proto.cri import runtime_pb2 as cri
from bridge.proto.nri import api_pb2 as api
from bridge.simulator.cri_calls import run_cri
from bridge.simulator.runtime import SimulatedRuntime

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 60.0  # the runtime's own events are bounded by its plugin timeouts
WORKERS = 4


class CriServer:
    """Serves `runtime`'s CRI socket at `path` between `start()` and `stop()`."""

    def __init__(self, runtime: SimulatedRuntime, path: str | os.PathLike[str]) -> None:
        self.runtime = runtime
        self.path = Path(path)
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a stale socket from an earlier run
        server = grpc.server(ThreadPoolExecutor(WORKERS, thread_name_prefix="sim-cri"))
        serve = {"Version": self._version, "UpdateContainerResources": self._update}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
            name: grpc.unary_unary_rpc_method_handler(
                serve[name], request_deserializer=request.FromString,
                response_serializer=response.SerializeToString)
            for name, (request, response) in METHODS.items()}),))
        server.add_insecure_port(f"unix://{self.path}")
        server.start()
        self._server = server
        log.info("simulated CRI socket on %s", self.path)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: server.stop(grace=0.5).wait())
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    # -- handlers (grpcio's threads) ----------------------------------------------------

    def _version(self, request: cri.VersionRequest, context: Any) -> cri.VersionResponse:
        profile = self.runtime.profile
        return cri.VersionResponse(version="0.1.0", runtime_name=profile.runtime_name,
                                   runtime_version=profile.runtime_version,
                                   runtime_api_version=CRI_API_VERSION)

    def _update(self, request: cri.UpdateContainerResourcesRequest,
                context: Any) -> cri.UpdateContainerResourcesResponse:
        loop = self._loop
        if loop is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, "runtime stopping")
        assert loop is not None
        future = asyncio.run_coroutine_threadsafe(update_resources(self.runtime, request), loop)
        try:
            error = future.result(CALL_TIMEOUT_S)
        except TimeoutError:
            future.cancel()
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "runtime did not finish the update")
        if error is not None:
            code, message = error
            context.abort(code, message)
        return cri.UpdateContainerResourcesResponse()


async def update_resources(runtime: SimulatedRuntime, request: cri.UpdateContainerResourcesRequest,
                           ) -> tuple[grpc.StatusCode, str] | None:
    """Run one CRI UpdateContainerResources on the runtime; an error code and text, or None."""
    if runtime.crashed is not None:  # a dead runtime answers nothing on its CRI socket either
        return grpc.StatusCode.UNAVAILABLE, f"runtime crashed: {runtime.crashed}"
    container = runtime.state.containers.get(request.container_id)
    if container is None:
        return grpc.StatusCode.NOT_FOUND, f"failed to find container: {request.container_id}"
    pod = runtime.state.pods.get(container.pod_sandbox_id)
    if pod is None:
        return grpc.StatusCode.NOT_FOUND, f"no sandbox for container {request.container_id}"
    resources = to_nri(request.linux)
    result = await run_cri(runtime, "UpdateContainerResources", pod, container,
                           linux_resources=resources)
    update = api.ContainerUpdate(container_id=request.container_id)
    update.linux.resources.CopyFrom(resources)
    runtime.note_cri_update(update)
    if not result.ok:
        return grpc.StatusCode.UNKNOWN, f"NRI container update failed: {result.error}"
    after = result.container
    if after is not None:
        # The event's fold recorded the resources; applying them is the runtime's `runc update`
        # (a state that writes cgroup files does it here). A container that is not running
        # only has its spec changed, as containerd does.
        applied = api.ContainerUpdate(container_id=request.container_id)
        applied.linux.resources.CopyFrom(after.linux.resources)
        runtime.state.apply_update(applied, route=None)  # the event's result, already as applied
    return None


def serve_cri(runtime: SimulatedRuntime, path: str | os.PathLike[str]) -> SimulatedRuntime:
    """`runtime`, also serving its CRI socket at `path` while it runs (composed here, outside the
    runtime class, so the runtime never imports its CRI side)."""
    runtime.cri_socket = Path(path)
    runtime.attached.append(CriServer(runtime, path))
    return runtime
