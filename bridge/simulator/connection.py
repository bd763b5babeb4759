"""One plugin connected to the simulated runtime, and how calls to it can fail.

The runtime is the ttrpc *client* on mux conn 1 (Plugin service) and the
*server* on conn 2 (Runtime service), so its `Trunk` uses server_conn=2,
client_conn=1.

Call outcomes follow the adaptation's `isFatalError`
(docs/protocol.md#when-the-runtime-drops-a-plugin):
- `PluginFatal`: a local deadline, a closed connection or a protocol error;
  the runtime closes the plugin and carries on without it (fail-open);
- `PluginFailed`: the plugin answered an error status (including a status 4
  it sent itself); the operation fails but the plugin stays connected.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from bridge.contract.catalogue import NriEvent
from bridge.contract.plugin_lifecycle import Lifecycle, Phase, Step
from bridge.errors import ConnectionClosed, ProtocolError, RpcError
from bridge.transport.trunk import Trunk
from bridge.wire import envelope, mux, ttrpc
from bridge.wire.status import Code

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
RUNTIME_SERVICE = "nri.pkg.api.v1alpha1.Runtime"

M = TypeVar("M", bound=Message)


class PluginFatal(Exception):
    """The plugin must be closed (the runtime's `isFatalError`)."""


class PluginFailed(Exception):
    """The plugin answered with an error status; not fatal."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"rpc error: code = {code_name(code)} desc = {message}")
        self.code = code
        self.message = message


def code_name(code: int) -> str:
    try:
        return Code(code).name
    except ValueError:
        return str(code)


def decode_message(cls: type[M], payload: bytes,
                   failure: Callable[[int, str], Exception] = PluginFailed) -> M:
    """Parse a protobuf payload; a malformed one raises `failure(INTERNAL, ...)`."""
    msg = cls()
    try:
        msg.ParseFromString(payload)
    except (DecodeError, ValueError) as exc:
        raise failure(Code.INTERNAL, f"cannot decode {cls.__name__}: {exc}") from None
    return msg


class PluginConnection:
    """A plugin as the runtime tracks it: identity, subscription, delivery mode."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.trunk: Trunk | None = None
        self.name = ""
        self.index = ""
        self.events = 0  # the accepted ConfigureResponse.events mask
        self.lifecycle = Lifecycle(f"connection#{seq}")  # the plugin's, from our side
        # v0.12+: set for good once the plugin answers a dedicated RPC with
        # Unimplemented; the nine fallback events then go through StateChange.
        self.use_state_change = False
        self.close_reason = ""
        self.closed_by_runtime = False
        self.registered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.configure_task: asyncio.Task[int] | None = None
        self.sync_chunks = 0

    @property
    def label(self) -> str:
        """How the runtime names the plugin: "NN-name"."""
        return f"{self.index}-{self.name}" if self.name else f"connection#{self.seq}"

    @property
    def state(self) -> Phase:
        return self.lifecycle.phase

    @property
    def is_active(self) -> bool:
        return (self.state is Phase.SYNCHRONIZED and self.trunk is not None
                and self.trunk.is_open)

    def subscribed(self, event: NriEvent) -> bool:
        return bool(self.events & event.bit)

    def advance(self, step: Step) -> None:
        """The plugin took `step` (LifecycleError if the protocol does not allow it now)."""
        self.lifecycle.name = f"plugin {self.label}"
        self.lifecycle.advance(step)

    def close(self, reason: str, *, by_runtime: bool = True) -> bool:
        """Close the connection; returns False if it was already closed."""
        if self.lifecycle.closed:
            return False
        self.lifecycle.advance(Step.CLOSE)
        self.close_reason = reason
        self.closed_by_runtime = by_runtime
        if not self.registered.done():
            self.registered.set_exception(PluginFatal(reason))
            self.registered.exception()  # retrieved: nobody may be waiting any more
        if self.trunk is not None:
            self.trunk.close(reason)
        return True

    async def call(self, method: str, payload: bytes, timeout_s: float) -> bytes:
        """One Plugin-service call with the runtime's client-side deadline."""
        trunk = self._open_trunk()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            return await trunk.client.call(PLUGIN_SERVICE, method, payload, timeout_s=timeout_s)
        except RpcError as exc:
            if exc.code == Code.DEADLINE_EXCEEDED and loop.time() >= deadline:
                raise PluginFatal(
                    f"{method}: no response within {timeout_s * 1000:.0f} ms") from None
            raise PluginFailed(exc.code, exc.message) from None
        except ConnectionClosed as exc:
            raise PluginFatal(f"{method}: connection closed ({exc})") from None
        except ProtocolError as exc:
            raise PluginFatal(f"{method}: protocol error ({exc})") from None

    async def call_raw(self, data: bytes, timeout_s: float, *, stream_id: int | None = None,
                       wire: Callable[[bytes], bytes] | None = None) -> envelope.Response:
        """Send a pre-encoded ttrpc Request body (any size, any stream id) on conn 1.

        For what the normal client refuses to send: the oversized Synchronize
        of a v0.6 runtime (up to 16 MiB, docs/protocol.md#size-limits) and hostile frames.
        `wire` turns the ttrpc frame into the bytes written (default: the Go
        mux pattern). Returns the Response envelope whatever its status.
        """
        trunk = self._open_trunk()
        client = trunk.client
        sid, future = client.open_stream(stream_id)
        header = ttrpc.HEADER.pack(len(data), sid, ttrpc.MessageType.REQUEST, 0)
        try:
            frame = header + data
            trunk.send_raw(wire(frame) if wire is not None
                           else mux.encode_message(mux.PLUGIN_SERVICE_CONN, frame))
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            raise PluginFatal(f"raw request on stream {sid}: no response within "
                              f"{timeout_s * 1000:.0f} ms") from None
        except (ConnectionClosed, ProtocolError) as exc:
            raise PluginFatal(f"raw request on stream {sid}: {exc}") from None
        finally:
            client.close_stream(sid)

    def _open_trunk(self) -> Trunk:
        if self.trunk is None or not self.trunk.is_open or self.lifecycle.closed:
            raise PluginFatal(f"plugin {self.label} is closed ({self.close_reason or 'no trunk'})")
        return self.trunk
