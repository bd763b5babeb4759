"""The contract both products share: NRI events, proto <-> JSON, and the webhook JSON (v1).

`bridge.contract` is the base of the bridge: it depends only on the generated NRI messages
(bridge.proto), bridge.errors and pydantic, and does no I/O. The event catalogue
(catalogue.py) defines every event once; convert.py maps NRI messages to and from JSON;
payload models (PodSandbox, Container, LinuxResources, ...) are derived from
schemas/nri/api.proto, so the proto file is the one source of truth for their shape; the
envelope and reply models are declared in `webhook_models.py`. The JSON Schemas in
schemas/webhook/ are generated from these models (`python -m bridge.contract.schema`). The
policy server imports the bridge only through this package.

The pydantic models are loaded on first use: the bridge's serving path only needs the
pydantic-free parts (catalogue.py, convert.py, adjustment.py, codec.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridge.contract.adjustment import adjustment_from_json, adjustment_to_json
from bridge.contract.catalogue import API_VERSION, EVENT_NAMES

if TYPE_CHECKING:
    from bridge.contract.nri_models import NRI_MODELS, nri_model
    from bridge.contract.webhook_models import Reject, RuntimeRef, WebhookReply, WebhookRequest

_MODELS = "bridge.contract.webhook_models"
_LAZY = {
    "Reject": _MODELS, "RuntimeRef": _MODELS, "WebhookReply": _MODELS, "WebhookRequest": _MODELS,
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
