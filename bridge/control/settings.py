"""Where the control API listens: the `control:` config section and its CLI flags.

A Unix socket by default (`/run/nri-webhook-bridge/control.sock`, mode 0660);
optionally also a loopback TCP address. Anything but loopback is refused:
`POST /v1/updates` changes running containers and has no authentication of
its own beyond the socket's file permissions. `metrics_address` is different:
it serves `GET /metrics` alone, so any address is allowed (a pod's, for
Prometheus to scrape).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from bridge.errors import ConfigError

DEFAULT_SOCKET = "/run/nri-webhook-bridge/control.sock"
DEFAULT_SOCKET_MODE = 0o660


@dataclass(frozen=True, slots=True)
class ControlSettings:
    socket_path: str | None = DEFAULT_SOCKET  # None: no Unix socket
    address: tuple[str, int] | None = None  # loopback TCP, optional
    socket_mode: int = DEFAULT_SOCKET_MODE
    explicit_socket: bool = False  # configured on purpose: failing to bind is fatal
    metrics_address: tuple[str, int] | None = None  # GET /metrics only, any address

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


class _Control(BaseModel):
    """The `control:` section as written (unknown keys refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    socket: Annotated[str | None, BeforeValidator(_socket)] = DEFAULT_SOCKET
    address: Annotated[tuple[str, int] | None, _address(_loopback)] = None
    socket_mode: Annotated[int, BeforeValidator(_mode)] = DEFAULT_SOCKET_MODE
    metrics_address: Annotated[tuple[str, int] | None, _address(_host_port)] = None


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
    )
