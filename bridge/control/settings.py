"""Where the control API listens: the `control:` config section and its CLI flags.

A Unix socket by default (`/run/nri-webhook-bridge/control.sock`, mode 0660), whose
peers are checked by their kernel credentials (`allowed_uids`, `allowed_gids`); optionally
also a loopback TCP address, which must authenticate its peers (`tls` with a
`client_ca_file`, or `bearer_token_file`) unless `insecure` (bridge.listening). Anything
but loopback is refused: `POST /v1/updates` changes running containers. `metrics_address`
is different: it serves `GET /metrics` alone, so any address is allowed (a pod's, for
Prometheus to scrape). Both are bounded (`header_timeout_s`, `idle_timeout_s`,
`max_connections`).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from bridge.errors import ConfigError
from bridge.listening.listener_config import (
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    Access,
    TlsFiles,
)

DEFAULT_SOCKET = "/run/nri-webhook-bridge/control.sock"
DEFAULT_SOCKET_MODE = 0o660


@dataclass(frozen=True, slots=True)
class ControlSettings:
    socket_path: str | None = DEFAULT_SOCKET  # None: no Unix socket
    address: tuple[str, int] | None = None  # loopback TCP, optional
    socket_mode: int = DEFAULT_SOCKET_MODE
    explicit_socket: bool = False  # configured on purpose: failing to bind is fatal
    metrics_address: tuple[str, int] | None = None  # GET /metrics only, any address
    access: Access = field(default_factory=Access)
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    @property
    def enabled(self) -> bool:
        return self.socket_path is not None or self.address is not None


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def _loopback(text: str) -> tuple[str, int]:
    host, port = _host_port(text)
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"{host} is not a loopback address (the control API "
                             "accepts container updates; keep it local)")
    return host, port


def parse_listen_address(text: str, key: str) -> tuple[str, int]:
    """`HOST:PORT`, IPv6 hosts in brackets (`[::]:9464`)."""
    try:
        return _host_port(text)
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None


def parse_address(text: str, key: str) -> tuple[str, int]:
    """A loopback `HOST:PORT` for the control API."""
    try:
        return _loopback(text)
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None


def _address(parse: Any) -> Any:
    def check(value: object) -> tuple[str, int] | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError("expected HOST:PORT")
        return parse(value) if value else None

    return BeforeValidator(check)


def _socket(value: object) -> object:
    if value is not None and (not isinstance(value, str) or not value.startswith("/")):
        raise ValueError("must be an absolute path, or null for none")
    return value


def _mode(value: object) -> int:
    if isinstance(value, str):
        try:
            value = int(value, 8)
        except ValueError:
            raise ValueError("expected an octal mode like 0660") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0o777:
        raise ValueError("expected an octal mode like 0660")
    if value & 0o007:
        raise ValueError(f"{value:04o} lets every local user change containers through the "
                         "socket; use 0660 or 0600")
    return value


def _path(value: object) -> object:
    if not isinstance(value, str) or not value.startswith("/"):
        raise ValueError("must be an absolute path")
    return value


_File = Annotated[str, BeforeValidator(_path)]


class _Tls(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    cert_file: _File
    key_file: _File
    client_ca_file: _File | None = None


class _Control(BaseModel):
    """The `control:` section as written (unknown keys refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    socket: Annotated[str | None, BeforeValidator(_socket)] = DEFAULT_SOCKET
    address: Annotated[tuple[str, int] | None, _address(_loopback)] = None
    socket_mode: Annotated[int, BeforeValidator(_mode)] = DEFAULT_SOCKET_MODE
    metrics_address: Annotated[tuple[str, int] | None, _address(_host_port)] = None
    tls: _Tls | None = None
    bearer_token_file: _File | None = None
    insecure: bool = False
    allowed_uids: list[Annotated[int, Field(ge=0)]] | None = None
    allowed_gids: list[Annotated[int, Field(ge=0)]] | None = None
    allowed_hosts: list[Annotated[str, Field(min_length=1, max_length=253)]] = []
    env_reader_uids: list[Annotated[int, Field(ge=0)]] = [0]
    env_over_tcp: bool = False
    header_timeout_s: Annotated[float, Field(gt=0, le=3600)] = DEFAULT_HEADER_TIMEOUT_S
    idle_timeout_s: Annotated[float, Field(gt=0, le=3600)] = DEFAULT_IDLE_TIMEOUT_S
    max_connections: Annotated[int, Field(ge=1, le=65536)] = DEFAULT_MAX_CONNECTIONS


def parse_control(section: Any, key: str = "control") -> ControlSettings:
    """Validate the `control:` section; raises ConfigError naming the first bad key."""
    if section is None:
        return ControlSettings()
    if not isinstance(section, dict):
        raise ConfigError(key, "must be a mapping")
    try:
        model = _Control.model_validate(section)
    except ValidationError as exc:
        raise ConfigError.first_of(exc.errors(), key) from None
    return ControlSettings(
        socket_path=model.socket,
        address=model.address,
        socket_mode=model.socket_mode,
        explicit_socket="socket" in model.model_fields_set and model.socket is not None,
        metrics_address=model.metrics_address,
        access=Access(
            tls=None if model.tls is None else TlsFiles(
                model.tls.cert_file, model.tls.key_file, model.tls.client_ca_file),
            bearer_token_file=model.bearer_token_file,
            insecure=model.insecure,
            allowed_uids=None if model.allowed_uids is None else tuple(model.allowed_uids),
            allowed_gids=None if model.allowed_gids is None else tuple(model.allowed_gids),
            allowed_hosts=tuple(model.allowed_hosts),
            env_reader_uids=tuple(model.env_reader_uids),
            env_over_tcp=model.env_over_tcp),
        header_timeout_s=model.header_timeout_s,
        idle_timeout_s=model.idle_timeout_s,
        max_connections=model.max_connections,
    )
