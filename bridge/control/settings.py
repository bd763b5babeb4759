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
from typing import Any

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


def parse_listen_address(text: str, key: str) -> tuple[str, int]:
    """`HOST:PORT`, IPv6 hosts in brackets (`[::]:9464`)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(key, f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def parse_address(text: str, key: str) -> tuple[str, int]:
    """A loopback `HOST:PORT` for the control API."""
    host, port = parse_listen_address(text, key)
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ConfigError(key, f"{host} is not a loopback address (the control API "
                              "accepts container updates; keep it local)")
    return host, port


def parse_control(section: Any, key: str = "control") -> ControlSettings:
    if section is None:
        return ControlSettings()
    if not isinstance(section, dict):
        raise ConfigError(key, "must be a mapping")
    unknown = set(section) - {"socket", "address", "socket_mode", "metrics_address"}
    if unknown:
        raise ConfigError(f"{key}.{sorted(unknown)[0]}", "unknown key")
    socket_path = section.get("socket", DEFAULT_SOCKET)
    if socket_path is not None and (not isinstance(socket_path, str)
                                    or not socket_path.startswith("/")):
        raise ConfigError(f"{key}.socket", "must be an absolute path, or null for none")
    address = section.get("address")
    if address is not None and not isinstance(address, str):
        raise ConfigError(f"{key}.address", "expected HOST:PORT")
    metrics = section.get("metrics_address")
    if metrics is not None and not isinstance(metrics, str):
        raise ConfigError(f"{key}.metrics_address", "expected HOST:PORT")
    mode = section.get("socket_mode", DEFAULT_SOCKET_MODE)
    if isinstance(mode, str):
        try:
            mode = int(mode, 8)
        except ValueError:
            raise ConfigError(f"{key}.socket_mode", "expected an octal mode like 0660") from None
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
        raise ConfigError(f"{key}.socket_mode", "expected an octal mode like 0660")
    if mode & 0o007:
        raise ConfigError(f"{key}.socket_mode", f"{mode:04o} lets every local user change "
                          "containers through the socket; use 0660 or 0600")
    return ControlSettings(
        socket_path=socket_path,
        address=parse_address(address, f"{key}.address") if address else None,
        socket_mode=mode,
        explicit_socket="socket" in section and socket_path is not None,
        metrics_address=(parse_listen_address(metrics, f"{key}.metrics_address") if metrics
                         else None),
    )
