"""The bridge's exception tree.

Three families are kept apart (style rule 5):
- local faults: our own bug or misuse (`BridgeBug`);
- remote faults: the peer broke the protocol or went away (`ProtocolError`,
  `ConnectionClosed`, `RpcError` carrying the peer's status);
- expected outcomes are not exceptions at this level.

Exceptions are translated once, at the I/O edge (bridge.transport), into these.
"""

from __future__ import annotations

from typing import Any


class BridgeError(Exception):
    """Base of every error the bridge raises on purpose."""


class BridgeBug(BridgeError):
    """A local fault: an internal invariant was violated (e.g. an oversized send)."""


class ProtocolError(BridgeError):
    """The peer sent bytes that violate the NRI mux or ttrpc protocol."""


class ConnectionClosed(BridgeError):
    """The runtime connection is gone; pending calls cannot complete."""


class RpcError(BridgeError):
    """A ttrpc call finished with a non-OK status (gRPC code numbering)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"rpc error: code = {code} desc = {message}")
        self.code = code
        self.message = message


class ConfigError(BridgeError):
    """Invalid configuration; `key` names the offending setting."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem

    @classmethod
    def first_of(cls, errors: list[Any], prefix: str) -> ConfigError:
        """The first of a pydantic `ValidationError`'s `errors()`, its key path as an operator
        writes it (`webhooks[1].timeout`, under `prefix`): every config section is validated by
        a pydantic model and reported through here."""
        first = errors[0]
        key = prefix
        for part in first["loc"]:
            # Literal unions and validator functions report the failing member: not a key.
            if isinstance(part, str) and part.startswith(("literal[", "function-")):
                continue
            key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else part
        if first["type"] == "extra_forbidden":
            problem = "unknown key"
        elif first["type"] == "missing":
            problem = "required"
        else:
            problem = str(first["msg"]).removeprefix("Value error, ")
        return cls(key, problem)
