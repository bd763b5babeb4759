"""Calling an EventHandler one event at a time, the way the plugin core does.

`serve` answers what a per-event method would: the response message (None for "no change"),
raising EventRejected for a rejection; `serve_sync` answers Synchronize's updates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from google.protobuf.message import Message

from bridge.nri.event_call import EventCall, EventHandler, EventRejected
from bridge.proto.nri import api_pb2 as api


async def serve(handler: EventHandler, ctx: EventCall, req: Message) -> Message | None:
    answer = await handler.handle(dataclasses.replace(ctx, request=req))
    if answer.reject is not None:
        raise EventRejected(answer.reject)
    return answer.response


async def serve_sync(handler: EventHandler, ctx: EventCall, pods: Sequence[api.PodSandbox],
                     containers: Sequence[api.Container]) -> list[api.ContainerUpdate]:
    answer = await handler.handle(dataclasses.replace(ctx, pods=pods, containers=containers))
    if answer.reject is not None:
        raise EventRejected(answer.reject)
    if isinstance(answer.response, api.SynchronizeResponse):
        return list(answer.response.update)
    return []
