"""Why a webhook call produced nothing usable: one exception, one `kind`.

Every fault on the policy side (the HTTP exchange, the reply's shape, the
allow list, a conflict with an earlier webhook, an open circuit) ends up as a
`WebhookFailure`, raised at exactly one place per kind, so the handler applies
the failure policy in one spot. A policy's explicit `reject` is not a failure:
it is an expected outcome and travels as data.
"""

from __future__ import annotations

from enum import Enum

from bridge.errors import BridgeError


class FailureKind(Enum):
    """What went wrong; the value doubles as the `outcome` in logs and metrics."""

    TIMEOUT = "timeout"  # no complete reply inside the budget
    BUDGET = "budget_exhausted"  # no time left to even try
    CONNECT = "connect_error"  # refused, no such socket, DNS, TLS handshake
    TRANSPORT = "transport_error"  # connection broke mid-exchange
    HTTP_STATUS = "http_status"  # a non-2xx answer
    TOO_LARGE = "reply_too_large"
    INVALID_JSON = "invalid_json"
    SCHEMA = "schema_violation"  # JSON, but not a valid reply for this event
    DISALLOWED = "disallowed"  # an adjustment kind outside the webhook's allow list
    INVALID = "invalid_value"  # well-formed but unacceptable (cpuset, unknown container...)
    CONFLICT = "conflict"  # touches a field an earlier webhook already set
    CIRCUIT_OPEN = "circuit_open"

    @property
    def is_unavailability(self) -> bool:
        """Failures that say the service is down or broken (they trip the breaker).

        Bad *decisions* (schema, allow list, conflicts) come from a service that
        is up and answering fast, so they do not.
        """
        return self in _UNAVAILABLE


_UNAVAILABLE = frozenset({
    FailureKind.TIMEOUT, FailureKind.CONNECT, FailureKind.TRANSPORT,
    FailureKind.HTTP_STATUS, FailureKind.TOO_LARGE, FailureKind.INVALID_JSON,
})


class WebhookFailure(BridgeError):
    """A webhook call failed; `reason` is one human-readable line."""

    def __init__(self, kind: FailureKind, reason: str) -> None:
        super().__init__(f"{kind.value}: {reason}")
        self.kind = kind
        self.reason = reason
