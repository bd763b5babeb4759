"""The engine: one event against one policy, from the request bytes to the reply bytes.

Owns the one request decoder into the SDK's ``Event`` (``request``, ``request_event``), the
evaluation with the failure policy and the node view fold (``evaluate``), the value a settled
evaluation is (``settled``: the reply, the node effects and the pushes; the server's settle step,
``policy_server.service.settle``, makes it), the one reply encoder of a settled decision, the one
place warnings are fitted (``reply``) and loading third-party policy modules (``loader``).

Must not: import web frameworks, do host I/O, or know any particular policy.
"""

from policy_server.engine.evaluate import Engine, Evaluation, describe
from policy_server.engine.loader import load_policies
from policy_server.engine.reply import decision_to_reply
from policy_server.sdk.decision_json import update_to_json
from policy_server.sdk.limit_checks import MAX_WARNINGS

__all__ = [
    "MAX_WARNINGS",
    "Engine",
    "Evaluation",
    "decision_to_reply",
    "describe",
    "load_policies",
    "update_to_json",
]
