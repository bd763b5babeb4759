"""systemd's manager on the D-Bus system bus: the only module that talks D-Bus (jeepney).

Owns one connection to the bus (opened on first use, dropped on any error and opened again on
the next call), the two calls the node executor needs (``SetUnitProperties`` and the manager's
``Version`` property) and the translation of every failure of the bus, the socket or systemd's
reply into ``SystemdBusError``, in one place (``_bus_errors``). Calls come from worker threads
(the executor runs in ``asyncio.to_thread``): one lock serialises them; each is bounded by
``timeout_s``.

Must not: decide which properties to set or what a failure means (``unit_properties`` does),
or log: the caller says once what a failing bus means for the node.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import DBusConnection, open_dbus_connection
from jeepney.wrappers import DBusErrorResponse, Properties, unwrap_msg

from policy_server.node.unit_properties import DEFAULT_SYSTEM_BUS, SystemdBusError, UnitProperty

# org.freedesktop.systemd1(5): the manager object and its interface.
_MANAGER = DBusAddress(
    "/org/freedesktop/systemd1",
    bus_name="org.freedesktop.systemd1",
    interface="org.freedesktop.systemd1.Manager",
)
# A call is on the request path (the executor's whole apply has EFFECTS_TIMEOUT_S): systemd
# answers SetUnitProperties in milliseconds when it is well.
CALL_TIMEOUT_S = 1.0


@contextmanager
def _bus_errors(what: str, address: str, timeout_s: float) -> Iterator[None]:
    """Every failure of jeepney, the socket or the peer, as one ``SystemdBusError``."""
    try:
        yield
    except DBusErrorResponse as exc:  # systemd (or the bus) said no: name and message
        detail = exc.data[0] if exc.data and isinstance(exc.data[0], str) else ""
        raise SystemdBusError(f"{what}: {exc.name}: {detail}".rstrip(": ")) from None
    except TimeoutError:
        raise SystemdBusError(f"{what}: no answer in {timeout_s:g} s") from None
    except OSError as exc:  # no socket, refused, reset, permission
        raise SystemdBusError(f"{what}: {address}: {exc.strerror or exc}") from None
    except (ValueError, RuntimeError) as exc:  # authentication refused, garbled reply, address
        raise SystemdBusError(f"{what}: {address}: {exc}") from None


class SystemdBus:
    """systemd's manager on the bus at ``address`` (a D-Bus address: ``unix:path=...``)."""

    def __init__(self, address: str = DEFAULT_SYSTEM_BUS, timeout_s: float = CALL_TIMEOUT_S):
        self.address = address
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._conn: DBusConnection | None = None

    def set_unit_properties(self, unit: str, properties: Sequence[UnitProperty]) -> None:
        """``SetUnitProperties(unit, runtime=true, properties)``: systemd applies them to the
        unit's cgroup and keeps them until the unit goes away (runtime: not written to /etc)."""
        body = (unit, True, [(p.name, (p.signature, p.value)) for p in properties])
        self._call(new_method_call(_MANAGER, "SetUnitProperties", "sba(sv)", body), unit)

    def version(self) -> str:
        """systemd's ``Version`` property (e.g. ``257.9-1~deb13u1``): proves the manager is
        there and answering."""
        body = self._call(Properties(_MANAGER).get("Version"), "Version")
        _signature, value = body[0]
        return str(value)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _call(self, message: Any, what: str) -> tuple[Any, ...]:
        with self._lock, _bus_errors(what, self.address, self.timeout_s):
            try:
                conn = self._connection()
                reply = conn.send_and_get_reply(message, timeout=self.timeout_s)
            except (OSError, ValueError, RuntimeError):
                self._drop()  # a broken connection is not used again
                raise
            return tuple(unwrap_msg(reply))

    def _connection(self) -> DBusConnection:
        if self._conn is None:
            # The bus daemon answers the Hello that follows authentication itself.
            self._conn = open_dbus_connection(self.address, auth_timeout=self.timeout_s)
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
