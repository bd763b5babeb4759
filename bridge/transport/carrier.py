"""What a ttrpc endpoint needs of the connection that carries it.

The ttrpc client and server write their frames through the trunk that owns them; they see it
only as a `Carrier`, so neither imports the trunk and the trunk alone knows both.
"""

from __future__ import annotations

from typing import Protocol


class Carrier(Protocol):
    """One side of a trunk: its name for logs and the two writes an endpoint makes."""

    @property
    def name(self) -> str: ...

    def send_request(self, stream_id: int, data: bytes) -> None:
        """Write a request frame on the client's logical connection."""

    def send_response(self, stream_id: int, data: bytes) -> None:
        """Write a response frame on the server's logical connection."""
