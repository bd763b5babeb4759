"""The webhook JSON contract between the bridge and policy services (api_version v1).

`bridge.contract` depends only on pydantic and the generated NRI descriptors; it
does no I/O. Payload models (PodSandbox, Container, LinuxResources, ...) are
derived from schemas/nri/api.proto, so the proto file is the one source of
truth for their shape; the envelope and reply models are declared in
`envelope.py`. The JSON Schemas in schemas/webhook/ are generated from these
models (`python -m bridge.contract.schema`).

The pydantic models are loaded on first use: the bridge's serving path only
needs the pydantic-free parts (events.py, adjustment.py, codec.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridge.contract.adjustment import adjustment_from_json, adjustment_to_json
from bridge.contract.events import API_VERSION, EVENT_NAMES

if TYPE_CHECKING:
    from bridge.contract.envelope import Reject, RuntimeRef, WebhookReply, WebhookRequest
    from bridge.contract.nri_models import NRI_MODELS, nri_model

_LAZY = {
    "Reject": "bridge.contract.envelope", "RuntimeRef": "bridge.contract.envelope",
    "WebhookReply": "bridge.contract.envelope", "WebhookRequest": "bridge.contract.envelope",
    "NRI_MODELS": "bridge.contract.nri_models", "nri_model": "bridge.contract.nri_models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)


__all__ = [
    "API_VERSION",
    "EVENT_NAMES",
    "NRI_MODELS",
    "Reject",
    "RuntimeRef",
    "WebhookReply",
    "WebhookRequest",
    "adjustment_from_json",
    "adjustment_to_json",
    "nri_model",
]
