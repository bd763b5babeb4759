"""The wire contract both products share: NRI events and fields, proto <-> JSON, webhook JSON.

`bridge.contract` is the base of the bridge and does no I/O. It depends on the generated
messages (bridge.proto: NRI, and CRI for cri_service.py), bridge.errors, protobuf, pydantic
(the reply models), msgspec (the request, request_structs.py) and orjson, and on nothing else
of the bridge. What
it holds: the event catalogue (catalogue.py, every event defined once, with the NRI version that
added it); the NRI version of a runtime (nri_version.py); the field tables (adjustment_fields.py,
field_table.py, owner_fields.py) and what a runtime does with each field (runtime_effects.py,
runtime_hazards.py, capabilities.py, applied_view.py, resource_overlay.py); the conversions
(convert.py between NRI messages and JSON, adjustment.py for removals, codec.py for replies and
log subjects, cri_service.py for CRI updates); the request, declared once as msgspec Structs
(request_structs.py: the policy server's decoder and the published request schemas), and its
one encoder (request_body.py); the reply's pydantic models (nri_models.py, webhook_models.py);
all derived from schemas/nri/api.proto, the one source of truth for the messages' shape; the
JSON Schemas generated from them (`python -m bridge.contract.schema`);
the plugin connection's lifecycle table (plugin_lifecycle.py); and the value grammars both
products check (cpu_list_grammar.py, quantity.py, systemd_slice.py).

Helpers both programs share but that are not the contract live beside it: bridge.node_tables
(the fold of NRI events into a node's pods and containers), bridge.reply_review (handler-crash
notes, replay comparison), bridge.process_setup (stop signals, log line formats, the
GC pause) and bridge.file_trust (which paths on the node may be trusted). The policy server
imports the bridge through these (and, for its test kit, bridge.kube and bridge.runtime_facts).

The pydantic models are loaded on first use: the bridge's serving path only needs the
pydantic-free parts (catalogue.py, convert.py, adjustment.py, codec.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridge.contract.adjustment import nri_adjustment_from_json, nri_adjustment_to_json
from bridge.contract.catalogue import API_VERSION, EVENT_NAMES

if TYPE_CHECKING:
    from bridge.contract.nri_models import NRI_MODELS, nri_model
    from bridge.contract.request_structs import WebhookRequest
    from bridge.contract.webhook_models import Reject, WebhookReply

_MODELS = "bridge.contract.webhook_models"
_LAZY = {
    "Reject": _MODELS, "WebhookReply": _MODELS,
    "WebhookRequest": "bridge.contract.request_structs",
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
    "WebhookReply",
    "WebhookRequest",
    "nri_adjustment_from_json",
    "nri_adjustment_to_json",
    "nri_model",
]
