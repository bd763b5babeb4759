"""What an NRI response message means as a webhook reply, and what a request is about.

Owns: `reply_json` (the response sent to the runtime in the reply shape a policy would have
produced, as recordings keep it), `updates_json`, `request_subjects`
(the pod and container an event's request carries) and `log_subject` (the log fields naming
them). Pure functions. Must not: encode the request envelope (bridge.contract.request_body) or
decode replies (bridge.webhooks.guard).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf.message import Message

from bridge.contract.adjustment import nri_adjustment_to_json
from bridge.contract.convert import to_json
from bridge.proto.nri import api_pb2 as api


def reply_json(response: Message | None) -> dict[str, Any]:
    """The reply form of a response message (empty for "no change")."""
    if response is None:
        return {}
    out: dict[str, Any] = {}
    for fd, value in response.ListFields():
        if fd.name == "adjust":
            out["adjust"] = nri_adjustment_to_json(value)
        elif fd.name in ("update", "evict"):
            out[fd.name] = [to_json(v) for v in value]
        elif fd.name == "reject" and value:
            out["reject"] = {"reason": getattr(response, "reason", "")}
    return out


def updates_json(updates: Sequence[api.ContainerUpdate]) -> dict[str, Any]:
    return {"update": [to_json(u) for u in updates]} if updates else {}


def request_subjects(req: Message | None,
                     ) -> tuple[api.PodSandbox | None, api.Container | None]:
    """The pod and the container an event's request carries, if any."""
    if req is None:
        return None, None
    fields = req.DESCRIPTOR.fields_by_name
    pod = getattr(req, "pod") if "pod" in fields and req.HasField("pod") else None  # noqa: B009
    container = (getattr(req, "container")  # noqa: B009 - any request type with a container
                 if "container" in fields and req.HasField("container") else None)
    return pod, container


def log_subject(req: Message | None) -> dict[str, str]:
    """Log fields naming what an event's request is about: pod, container, container id."""
    out: dict[str, str] = {}
    pod, container = request_subjects(req)
    if pod is not None:
        out["pod"] = f"{pod.namespace}/{pod.name}"
    if container is not None:
        out["container"] = container.name
        out["container_id"] = container.id
    return out
