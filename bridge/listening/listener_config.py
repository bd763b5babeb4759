"""The settings of one HTTP listener, and the refusal of a TCP listener nobody authenticates.

A TCP listener that can read or change node state must authenticate its peers: mutual TLS
(`client_ca_file`, with the server's `cert_file` and `key_file`) or a bearer token file, or
both. Without either it starts only when `insecure` is set, and then says so loudly in the log.
Unix-socket listeners authenticate by the kernel's peer credentials (peer_creds).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

MIB = 1 << 20
DEFAULT_BODY_BYTES = 1 * MIB
DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 60.0
DEFAULT_IDLE_TIMEOUT_S = 5.0
DEFAULT_MAX_CONNECTIONS = 256
METRICS_MAX_CONNECTIONS = 64
METRICS_BODY_BYTES = 64 << 10
# Hosts every TCP listener answers to besides its own bind address.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class ListenerConfigError(Exception):
    """A listener cannot start as configured; the message names the setting."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert_file: str
    key_file: str
    client_ca_file: str | None = None  # set: clients must present a certificate it signed


@dataclass(frozen=True, slots=True)
class Bounds:
    """How much one listener takes: bytes per request body (by path prefix, longest first),
    seconds to send the headers, the body and between requests, connections at once."""

    max_body_bytes: int = DEFAULT_BODY_BYTES
    body_bytes_by_path: tuple[tuple[str, int], ...] = ()  # (path prefix, bytes)
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def body_limit(self, path: str) -> int:
        for prefix, limit in self.body_bytes_by_path:
            if path.startswith(prefix):
                return limit
        return self.max_body_bytes


@dataclass(frozen=True, slots=True)
class Access:
    """Who may use a listener that reads or changes node state."""

    tls: TlsFiles | None = None
    bearer_token_file: str | None = None
    insecure: bool = False  # plain TCP without authentication, on purpose
    allowed_uids: tuple[int, ...] | None = None  # Unix: None = root and our own uid
    allowed_gids: tuple[int, ...] | None = None  # Unix: None = the socket file's group
    allowed_hosts: tuple[str, ...] = ()  # Host/Origin names beyond loopback and the bind host
    env_reader_uids: tuple[int, ...] = (0,)  # Unix peers that see environment values
    env_over_tcp: bool = False  # authenticated TCP peers see environment values too

    @property
    def authenticates(self) -> bool:
        return self.bearer_token_file is not None or (
            self.tls is not None and self.tls.client_ca_file is not None)


def check_tcp_access(access: Access, where: str, flag: str = "--insecure") -> None:
    """Refuse an unauthenticated TCP listener unless `insecure`; warn loudly when insecure."""
    if access.tls is not None and access.tls.client_ca_file is not None and not (
            access.tls.cert_file and access.tls.key_file):
        raise ListenerConfigError(f"{where}: a client CA needs the server's cert_file and "
                                  "key_file too")
    if access.authenticates:
        return
    if not access.insecure:
        raise ListenerConfigError(
            f"{where}: a TCP listener that reads or changes node state needs authentication: "
            "mutual TLS (cert_file, key_file, client_ca_file) or a bearer token file; "
            f"{flag} serves plain, unauthenticated TCP (every local user can reach loopback)")
    log.warning("INSECURE: %s serves plain TCP without authentication (%s): every user who "
                "can reach it can read and change node state", where, flag)
