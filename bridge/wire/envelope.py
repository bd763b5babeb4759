"""ttrpc Request/Response envelopes (ttrpc request.proto) encode and decode.

Decoding never lets a protobuf exception escape: malformed envelopes raise
ProtocolError. On success a Response carries the payload with `status` absent,
as the Go server does; on error it carries the status and no payload
(docs/protocol.md#request-and-response).
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError

from bridge.errors import ProtocolError
from bridge.proto.nri import ttrpc_pb2
from bridge.wire.status import Code


@dataclass(frozen=True, slots=True)
class Request:
    service: str
    method: str
    payload: bytes
    timeout_nano: int = 0
    metadata: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Response:
    code: int
    message: str
    payload: bytes

    @property
    def ok(self) -> bool:
        return self.code == Code.OK


def encode_request(request: Request) -> bytes:
    msg = ttrpc_pb2.Request(
        service=request.service,
        method=request.method,
        payload=request.payload,
        timeout_nano=request.timeout_nano,
    )
    for key, value in request.metadata:
        msg.metadata.add(key=key, value=value)
    data: bytes = msg.SerializeToString()
    return data


def decode_request(data: bytes) -> Request:
    msg = ttrpc_pb2.Request()
    try:
        msg.ParseFromString(data)
    except (DecodeError, ValueError) as exc:
        raise ProtocolError(f"unmarshal request error: {exc}") from None
    return Request(
        service=msg.service,
        method=msg.method,
        payload=msg.payload,
        timeout_nano=msg.timeout_nano,
        metadata=tuple((kv.key, kv.value) for kv in msg.metadata),
    )


def encode_ok_response(payload: bytes) -> bytes:
    # An empty payload serializes to zero bytes: the field is simply absent.
    data: bytes = ttrpc_pb2.Response(payload=payload).SerializeToString()
    return data


def encode_error_response(code: int, message: str) -> bytes:
    data: bytes = ttrpc_pb2.Response(
        status=ttrpc_pb2.Status(code=code, message=message)
    ).SerializeToString()
    return data


def decode_response(data: bytes) -> Response:
    msg = ttrpc_pb2.Response()
    try:
        msg.ParseFromString(data)
    except (DecodeError, ValueError) as exc:
        raise ProtocolError(f"unmarshal response error: {exc}") from None
    if msg.HasField("status"):
        return Response(msg.status.code, msg.status.message, msg.payload)
    return Response(Code.OK, "", msg.payload)
