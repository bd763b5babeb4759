"""The policy server's exception tree.

Three kinds are kept apart, as in the bridge (docs/architecture.md#errors): faults in what a
peer sent us (``RequestError``, the 422 of the one request path, and ``PayloadError``, a field it
names; ``RulesError``), expected policy outcomes (``PolicyError``: a handler could not decide,
e.g. a bad pod annotation), and failures talking to the bridge (``BridgeControlError``).
Anything else that escapes a handler is our bug and is logged with its traceback at the engine
boundary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class PolicyServerError(Exception):
    """Root of every error this package raises on purpose."""


class PayloadError(PolicyServerError):
    """A request body does not have the shape of the webhook envelope.

    ``field`` is a dotted path into the body (``container.linux.resources.cpu.shares``) so the
    HTTP layer can answer 422 naming it.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class RequestError(PolicyServerError):
    """A webhook request the server refuses: ``detail`` is the 422's ``detail`` list, each entry's
    ``loc`` the request decoder's path (``["body", "container", "state"]``) and ``msg`` its
    message (policy_server.engine.request).

    ``event`` is the request's event when the body decoded but the SDK refused it (such
    requests are counted as ``invalid`` in the metrics), else ``None``. ``status``: 422 for a
    body not of the contract's shape, 400 for a string that breaks its field's limits (a NUL
    byte, a control character, too long, a path of the wrong shape; docs/webhooks.md).
    """

    def __init__(
        self, detail: list[dict[str, object]], event: str | None = None, status: int = 422
    ) -> None:
        first = detail[0] if detail else {}
        super().__init__(f"{first.get('loc')}: {first.get('msg')}")
        self.detail = detail
        self.event = event
        self.status = status


class RulesError(PolicyServerError):
    """A rules file is invalid; ``key`` is the dotted path of the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message


class PolicyError(PolicyServerError):
    """A handler could not produce its decision for this event (an expected outcome).

    Raised by handlers, e.g. for an unparsable pod annotation. The engine turns it into a
    warning (failure policy ``Ignore``) or a rejection (``Fail``).
    """


class InvalidReplyError(PolicyServerError):
    """A policy's merged decision became a reply outside the webhook contract (our side's
    fault: the server answers 500). ``errors`` are the contract check's complaints, each
    naming the field (``loc``)."""

    def __init__(self, errors: Sequence[Mapping[str, object]], message: str) -> None:
        super().__init__(message)
        self.errors = errors


class UnknownPolicyError(PolicyServerError):
    """No policy is registered under the requested name."""


class PolicyLoadError(PolicyServerError):
    """A ``--policy-module`` could not be imported or defines no policy."""


class BridgeControlError(PolicyServerError):
    """The bridge's control API could not be reached or answered something unusable."""


class BridgeUnreachableError(BridgeControlError):
    """Nothing accepts connections at the bridge's control address: its socket does not exist
    (yet) or refuses them. At start-up that is the expected order, not a failure."""
