"""The request message of one lifecycle event, built from the objects it is about.

Owns: filling an event's request type (from the catalogue) with the pod, the container and the
resources the event carries; fields the request type does not have are left out. Must not: run
the event (bridge.simulator.event_runner) or decide which events a runtime has.
"""

from __future__ import annotations

from google.protobuf.message import Message

from bridge.contract.catalogue import REQUEST_TYPES, NriEvent
from bridge.proto.nri import api_pb2 as api


def event_request(
    event: NriEvent,
    pod: api.PodSandbox,
    container: api.Container | None = None,
    *,
    linux_resources: api.LinuxResources | None = None,
    overhead_linux_resources: api.LinuxResources | None = None,
) -> Message:
    request = REQUEST_TYPES[event]()
    fields = request.DESCRIPTOR.fields_by_name
    # Reflective: the same field names on fourteen request types.
    getattr(request, "pod").CopyFrom(pod)  # noqa: B009
    if container is not None and "container" in fields:
        getattr(request, "container").CopyFrom(container)  # noqa: B009
    if linux_resources is not None and "linux_resources" in fields:
        getattr(request, "linux_resources").CopyFrom(linux_resources)  # noqa: B009
    if overhead_linux_resources is not None and "overhead_linux_resources" in fields:
        getattr(request, "overhead_linux_resources").CopyFrom(  # noqa: B009
            overhead_linux_resources)
    return request
