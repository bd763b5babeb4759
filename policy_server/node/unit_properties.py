"""Pod-slice values as systemd unit properties, so systemd keeps them (cgroup v2, systemd driver).

With the systemd cgroup driver every pod slice is a systemd unit, and systemd writes a unit's
own properties back into its cgroup whenever it re-applies it (a neighbour's container scope
going away is enough): a value written only into ``cpu.max`` is gone again. kubelet sets pod
slices through systemd (runc's systemd manager: ``SetUnitProperties`` over D-Bus, runtime=true,
then the same values into the files), so systemd keeps them. The executor does the same: this
module says which cgroups are units (``unit_name``), which properties a v2 file value is
(``properties_for``, runc's mapping) and what the node does when the bus fails
(``SystemdUnits``: one WARNING when calls start failing, one INFO when they work again; the
files are written directly anyway and the reconciler keeps them).

The mapping (runc, libcontainer/cgroups/systemd: ``addCpuQuota``, ``unifiedResToSystemdProps``):
``cpu.weight`` N -> ``CPUWeight`` N; ``memory.max`` N|max -> ``MemoryMax`` N|UINT64_MAX;
``cpu.max`` quota -> ``CPUQuotaPerSecUSec`` = quota * 10^6 / period, rounded *up* to 10 ms
(systemd keeps a percentage internally, so runc rounds up to the next whole per cent) and
UINT64_MAX (USEC_INFINITY) for ``max``, plus ``CPUQuotaPeriodUSec`` when the cgroup's period is
not the kernel's default 100 ms (systemd writes its own period back otherwise). Files systemd
has no property for (``cpu.idle``, ``cpu.bvt_warp_ns``) have no properties: direct writes only.

Must not: do I/O (the bus is handed in, ``UnitBus``), or raise for a failing bus: it is logged
once and counted, and the caller writes the files either way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any, Protocol

from bridge.contract import systemd_slice

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_BUS = "unix:path=/run/dbus/system_bus_socket"
UINT64_MAX = (1 << 64) - 1  # systemd's USEC_INFINITY / CGROUP_LIMIT_MAX: "no limit"
DEFAULT_CPU_PERIOD_US = 100_000  # the kernel's cpu.max period, systemd's default too
_QUOTA_STEP_US = 10_000  # 1 % of a CPU second: systemd's granularity for CPUQuota
_USEC_PER_SEC = 1_000_000


class PropertiesMode(StrEnum):
    """``--systemd-properties``: auto (where systemd answers at start-up), on, off."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


@dataclass(frozen=True, slots=True)
class UnitProperty:
    """One ``(sv)`` of ``SetUnitProperties``: every property here is a D-Bus uint64 (``t``)."""

    name: str
    value: int
    signature: str = "t"

    def __str__(self) -> str:
        return f"{self.name}={'infinity' if self.value == UINT64_MAX else self.value}"


def unit_name(rel: PurePosixPath) -> str | None:
    """The systemd unit whose cgroup is ``rel`` (relative to the v2 root), or None if ``rel`` is
    not one: every segment a slice named after its parent (``a.slice/a-b.slice``), the last a
    slice or a scope in it (``a-b.slice/x-1.scope``) — the names systemd gives its units."""
    parts = rel.parts
    if not parts:
        return None
    slices = parts[:-1] if parts[-1].endswith(systemd_slice.SCOPE_SUFFIX) else parts
    if slices and not systemd_slice.is_slice_path(slices):
        return None
    return parts[-1]


def properties_for(v2_file: str, text: str, period_us: int | None) -> tuple[UnitProperty, ...]:
    """The properties that make systemd write ``text`` into ``v2_file`` itself (empty: systemd
    has none for the file). ``cpu.max`` ``text`` is the quota alone (``max`` or microseconds),
    ``period_us`` the cgroup's current period (None: unknown, the default)."""
    if v2_file == "cpu.weight":
        return (UnitProperty("CPUWeight", int(text)),)
    if v2_file == "memory.max":
        return (UnitProperty("MemoryMax", UINT64_MAX if text == "max" else int(text)),)
    if v2_file != "cpu.max":
        return ()
    period = period_us or DEFAULT_CPU_PERIOD_US
    out = []
    if period != DEFAULT_CPU_PERIOD_US:
        out.append(UnitProperty("CPUQuotaPeriodUSec", period))
    if text == "max":
        per_sec = UINT64_MAX
    else:
        per_sec = int(text) * _USEC_PER_SEC // period
        per_sec = -(-per_sec // _QUOTA_STEP_US) * _QUOTA_STEP_US  # up to the next whole per cent
    out.append(UnitProperty("CPUQuotaPerSecUSec", per_sec))
    return tuple(out)


class SystemdBusError(Exception):
    """The bus or systemd could not do what was asked (the message says why); the only
    exception a ``UnitBus`` raises."""


class UnitBus(Protocol):
    """What this module needs of systemd on the bus (``systemd_bus.SystemdBus``)."""

    address: str

    def set_unit_properties(self, unit: str, properties: Sequence[UnitProperty]) -> None: ...

    def version(self) -> str: ...


class BusState(StrEnum):
    OFF = "off"  # --systemd-properties off, or auto and systemd did not answer at start-up
    UNPROBED = "unprobed"
    WORKING = "working"
    FAILING = "failing"  # the last call failed: said once; calls go on, files are written


class SystemdUnits:
    """Sets pod-slice values as unit properties while the bus works; says once when not."""

    def __init__(
        self,
        mode: PropertiesMode = PropertiesMode.OFF,
        bus: UnitBus | None = None,
        observe: Callable[[str], None] = lambda result: None,
    ) -> None:
        self.mode = mode if bus is not None else PropertiesMode.OFF
        self.bus = bus
        self.observe = observe  # "ok" / "failed" per call (the server counts them)
        self.state = BusState.OFF if self.mode is PropertiesMode.OFF else BusState.UNPROBED
        self.reason = "--systemd-properties off" if self.state is BusState.OFF else ""
        self.systemd_version = ""
        # The executor runs in worker threads: one call and its state change at a time.
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.state is not BusState.OFF

    def disable(self, reason: str) -> None:
        """Not for this node (cgroup v1): nothing is ever called."""
        if self.state is not BusState.OFF:
            self.state, self.reason = BusState.OFF, reason

    def probe(self) -> None:
        """Ask systemd for its version once (start-up). auto: a silent bus turns this off."""
        if self.bus is None or self.state is BusState.OFF:
            return
        try:
            self.systemd_version = self.bus.version()
        except SystemdBusError as exc:
            self.reason = str(exc)
            self.state = BusState.OFF if self.mode is PropertiesMode.AUTO else BusState.FAILING
            return
        self.state, self.reason = BusState.WORKING, ""

    def set(self, unit: str, properties: Sequence[UnitProperty], context: str = "") -> bool:
        """Set ``properties`` on ``unit``; False if not done (off, or the call failed)."""
        if self.bus is None or self.state is BusState.OFF or not properties:
            return False
        with self._lock:
            try:
                self.bus.set_unit_properties(unit, properties)
            except SystemdBusError as exc:
                self._outcome(False, f"{unit}: {exc}", context)
                return False
            self._outcome(True, "", context)
            return True

    def _outcome(self, ok: bool, reason: str, context: str) -> None:
        # OFF never gets here (nothing is called there); the call's outcome alone decides.
        before = self.state
        self.state = BusState.WORKING if ok else BusState.FAILING
        self.observe("ok" if ok else "failed")
        if not ok:
            self.reason = reason
        if before is not BusState.FAILING and self.state is BusState.FAILING:
            log.warning(
                "systemd unit properties cannot be set (%s); pod slice values are written to "
                "the cgroup files only, systemd may put its own back until the reconciler's next "
                "pass; said once until calls work again %s",
                reason,
                context,
            )
        elif before is BusState.FAILING and self.state is BusState.WORKING:
            self.reason = ""
            log.info("systemd unit properties are set again %s", context)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "bus": self.bus.address if self.bus is not None else "",
            "state": self.state.value,
            "systemd_version": self.systemd_version,
            "reason": self.reason,
        }
