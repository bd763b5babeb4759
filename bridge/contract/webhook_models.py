"""The reply a policy returns, as pydantic models: the face of bridge.contract.reply_models.

The request is declared once, as msgspec Structs (bridge.contract.request_structs), not here;
the reply's models carry every value rule of the contract (bridge.contract.value_rules) and live
in reply_models. This module keeps the names the rest of the code imports.

Imported lazily: the bridge's serving path does not need pydantic models (about
7 MB of memory); the policy server and the schema generator do.
"""

from __future__ import annotations

from bridge.contract.catalogue import API_VERSION, EVENT_NAMES
from bridge.contract.reply_models import (
    Adjustment,
    Eviction,
    Reject,
    Removals,
    Update,
    WebhookReply,
)

__all__ = ["API_VERSION", "EVENT_NAMES", "Adjustment", "Eviction", "Reject", "Removals",
           "Update", "WebhookReply"]
