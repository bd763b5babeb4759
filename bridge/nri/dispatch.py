"""The Plugin service's method table: every RPC decoded once, by its entry's types.

Each entry (`Method`) carries its request and reply message types (grpclib style); the entry
decodes the payload once, hands the typed message on and encodes the reply. Event RPCs and
StateChange become one EventCall each for the handler chain; the Answer becomes the event's
response, or the error that fails the operation.

Rules this module enforces (docs/protocol.md#registration, docs/protocol.md#what-the-go-stub-does,
docs/protocol.md#how-events-are-delivered):
- every one of the 18 Plugin methods answers; events the handler does not want get an empty
  success, never Unimplemented (a v0.12 runtime would switch us to StateChange permanently);
- StateChange is dispatched on its `event` (building the event's dedicated request type, so a
  handler sees one type per event); unknown values get an empty success;
- a rejection fails the operation: ValidateContainerAdjustment answers reject=true, every other
  event gets an error status with the reason.

Must not know what handlers do.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import DecodeError, Message

from bridge.contract.catalogue import EVENTS_BY_RPC, POD_EVENTS, SPEC_OF, NriEvent
from bridge.errors import RpcError
from bridge.nri.event_call import Answer, EventHandler
from bridge.nri.runtime_setup import CallFactory
from bridge.proto.nri import api_pb2 as api
from bridge.transport.ttrpc_server import MethodHandler
from bridge.wire.envelope import Request
from bridge.wire.status import Code

log = logging.getLogger(__name__)

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"

Req = TypeVar("Req", bound=Message)


@dataclass(frozen=True, slots=True)
class Method(Generic[Req]):
    """One RPC: its types and what serves it (returning None answers with 0 bytes, the empty
    message, which is also "no change" for every event response)."""

    request_type: type[Req]
    reply_type: type[Message]
    serve: Callable[[Req, Request], Awaitable[Message | None]]

    async def __call__(self, request: Request) -> bytes:
        message = self.request_type()
        try:
            message.ParseFromString(request.payload)
        except (DecodeError, ValueError) as exc:
            # Go ttrpc decodes every input: garbage gets Internal.
            raise RpcError(Code.INTERNAL,
                           f"cannot decode {self.request_type.__name__}: {exc}") from None
        reply = await self.serve(message, request)
        if reply is None:
            return b""
        data: bytes = reply.SerializeToString()
        return data


class EventDispatch:
    """The event RPCs and StateChange, each made one EventCall by the CallFactory the last
    Configure handed over (`start`; before any, the unconfigured one it was built with)."""

    def __init__(self, chain: EventHandler, calls: CallFactory) -> None:
        self._chain = chain
        self._calls = calls

    def start(self, calls: CallFactory) -> None:
        self._calls = calls

    def table(self) -> dict[str, MethodHandler]:
        methods: dict[str, MethodHandler] = {
            "StateChange": Method(api.StateChangeEvent, api.Empty, self._state_change),
        }
        for rpc, event in EVENTS_BY_RPC.items():
            spec = SPEC_OF[event]
            methods[rpc] = Method(spec.request_type, spec.response_type, self._dedicated(event))
        return methods

    def _dedicated(self, event: NriEvent,
                   ) -> Callable[[Message, Request], Awaitable[Message | None]]:
        async def serve(req: Message, request: Request) -> Message | None:
            return await self._dispatch(event, req, request, via_state_change=False)
        return serve

    async def _state_change(self, change: api.StateChangeEvent, request: Request) -> None:
        try:
            event = NriEvent(change.event)
        except ValueError:
            log.debug("StateChange with unknown event %d; answering empty", change.event)
            return None
        req = SPEC_OF[event].request_type()
        fields = req.DESCRIPTOR.fields_by_name
        if change.HasField("pod") and "pod" in fields:
            getattr(req, "pod").CopyFrom(change.pod)  # noqa: B009 - every type with a pod
        if event not in POD_EVENTS and change.HasField("container") and "container" in fields:
            getattr(req, "container").CopyFrom(change.container)  # noqa: B009
        await self._dispatch(event, req, request, via_state_change=True)
        return None  # Empty: whatever the handler returned has no channel here

    async def _dispatch(self, event: NriEvent, req: Message, request: Request,
                        via_state_change: bool) -> Message | None:
        calls = self._calls
        call = calls(event, event.rpc_name, calls.deadline(request), request=req,
                     via_state_change=via_state_change)
        return _reply(event, await self._chain.handle(call))


def _reply(event: NriEvent, answer: Answer) -> Message | None:
    if answer.reject is not None:
        if event is NriEvent.VALIDATE_CONTAINER_ADJUSTMENT:
            return api.ValidateContainerAdjustmentResponse(reject=True, reason=answer.reject)
        raise RpcError(Code.UNKNOWN, answer.reject)
    response = answer.response
    expected = SPEC_OF[event].response_type
    if response is not None and not isinstance(response, expected):
        log.error("handler answered %s with a %s; answering with no change", event.rpc_name,
                  type(response).__name__)
        return None
    return response
