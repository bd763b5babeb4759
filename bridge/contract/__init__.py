"""The webhook JSON contract between the bridge and policy services (api_version v1).

`bridge.contract` depends only on pydantic and the generated NRI descriptors; it
does no I/O. Payload models (PodSandbox, Container, LinuxResources, ...) are
derived from schemas/nri/api.proto, so the proto file is the one source of
truth for their shape; the envelope and reply models are declared here. The
JSON Schemas in schemas/webhook/ are generated from these models
(`python -m bridge.contract.schema`).
"""

from bridge.contract.adjustment import adjustment_from_json, adjustment_to_json
from bridge.contract.envelope import (
    API_VERSION,
    EVENT_NAMES,
    Reject,
    RuntimeRef,
    WebhookReply,
    WebhookRequest,
)
from bridge.contract.nri_models import NRI_MODELS, nri_model

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
