"""The webhook contract's JSON Schema of one event's request, for a policy that checks names.

Owns ``request_schema(event)`` and ``reply_schema(event)``: the same documents as
``schemas/webhook/events/<Event>.request.schema.json`` and ``.reply.schema.json`` (generated
from the contract's models by ``bridge.contract.schema``, never read from disk, so an installed
package has it too), built once per process and cached. The built-in ``cel`` policy
type-checks its expressions against the request's, and checks its constant mutations against
the reply's.
Must not do I/O or change the documents it hands out (callers get read-only views).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from bridge.contract import schema as _schema
from bridge.contract.catalogue import EventName


@functools.cache
def _documents() -> Mapping[str, dict[str, Any]]:
    return MappingProxyType(_schema.build())


def _event_schema(event: EventName | str, side: str) -> Mapping[str, Any]:
    name = str(event)
    doc = _documents().get(f"events/{name}.{side}.schema.json")
    if doc is None:
        raise KeyError(f"no event named {name!r}")
    return MappingProxyType(doc)


def request_schema(event: EventName | str) -> Mapping[str, Any]:
    """The JSON Schema of ``event``'s request (``$defs`` included)."""
    return _event_schema(event, "request")


def reply_schema(event: EventName | str) -> Mapping[str, Any]:
    """The JSON Schema of ``event``'s reply (``$defs`` included)."""
    return _event_schema(event, "reply")
