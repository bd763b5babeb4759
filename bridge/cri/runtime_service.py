"""A small CRI client over the runtime's Unix socket (grpcio), callable from asyncio.

Owns: one gRPC channel to the CRI socket, the two calls the bridge makes (Version,
UpdateContainerResources), each with a deadline, and the translation of gRPC failures into
`CriError`, once, here. Must not: decide what to update or when (bridge.nri.update_routes).

The calls are grpcio's blocking ones, run in the loop's default executor: grpcio's asyncio API
does not run on uvloop, which serves the bridge. A call occupies one executor thread for at
most its deadline. grpcio is imported on the first call, not at start-up: importing it took
the bridge's start-up peak RSS from 47 to 54 MiB (2026-11-28), which a bridge that never sends
an update through CRI need not carry.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any

from bridge.contract.cri_service import CRI_API_VERSION, METHODS, SERVICE
from bridge.errors import BridgeError
from bridge.proto.cri import runtime_pb2 as cri

log = logging.getLogger(__name__)

# The default CRI socket of each runtime, by the name it gives NRI at registration.
DEFAULT_SOCKETS = {
    "containerd": "/run/containerd/containerd.sock",
    "v2": "/run/containerd/containerd.sock",
    "cri-o": "/var/run/crio/crio.sock",
    "crio": "/var/run/crio/crio.sock",
}
VERSION_TIMEOUT_S = 5.0


class CriError(BridgeError):
    """A CRI call failed; `code` is the gRPC status name ("NOT_FOUND", "DEADLINE_EXCEEDED")."""

    def __init__(self, call: str, code: str, detail: str) -> None:
        super().__init__(f"CRI {call}: {code}: {detail}")
        self.call = call
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class CriVersion:
    runtime_name: str
    runtime_version: str
    runtime_api_version: str


def default_socket(runtime_name: str) -> str | None:
    return DEFAULT_SOCKETS.get(runtime_name.strip().lower())


class CriClient:
    """UpdateContainerResources and Version on one CRI socket."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self._channel: Any = None  # grpc.Channel, once opened
        self._stubs: dict[str, Any] = {}  # call name -> grpcio's callable

    def _open(self) -> dict[str, Any]:
        if self._channel is None:
            if not os.path.exists(self.socket_path):
                raise CriError("connect", "UNAVAILABLE", f"no CRI socket at {self.socket_path}")
            channel = _grpc().insecure_channel(f"unix://{self.socket_path}")
            self._stubs = {name: channel.unary_unary(
                f"/{SERVICE}/{name}", request_serializer=request.SerializeToString,
                response_deserializer=response.FromString)
                for name, (request, response) in METHODS.items()}
            self._channel = channel
        return self._stubs

    async def version(self) -> CriVersion:
        reply: cri.VersionResponse = await self._call(
            "Version", cri.VersionRequest(version=CRI_API_VERSION), VERSION_TIMEOUT_S)
        return CriVersion(reply.runtime_name, reply.runtime_version, reply.runtime_api_version)

    async def update_container_resources(self, request: cri.UpdateContainerResourcesRequest,
                                         timeout_s: float) -> None:
        await self._call("UpdateContainerResources", request, timeout_s)

    async def _call(self, call: str, request: Any, timeout_s: float) -> Any:
        method = self._open()[call]
        grpc = _grpc()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                None, lambda: method(request, timeout=timeout_s, wait_for_ready=False))
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            detail = exc.details() if hasattr(exc, "details") else str(exc)
            raise CriError(call, code.name if code is not None else "UNKNOWN",
                           str(detail or "")) from None

    def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()


def _grpc() -> Any:
    import grpc  # on first use (see the module docstring)

    return grpc
