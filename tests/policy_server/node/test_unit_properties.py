"""Pod slice values as systemd unit properties: runc's mapping, the bus states, the executor.

The bus here is an in-memory ``UnitBus``; tests/policy_server/node/test_systemd_bus.py speaks to a
real dbus-daemon.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import pytest

from policy_server.node.cgroup_layout import CgroupVersion
from policy_server.node.cpu_weight import CpuWeights, WeightSetting
from policy_server.node.execution import ExecutorMode
from policy_server.node.executor import NodeExecutor
from policy_server.node.unit_properties import (
    UINT64_MAX,
    BusState,
    PropertiesMode,
    SystemdBusError,
    SystemdUnits,
    UnitProperty,
    properties_for,
    unit_name,
)
from policy_server.sdk.effects import CgroupWrite

POD_UNIT = "kubepods-besteffort-pod1.slice"
POD_DIR = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice"


class MemoryBus:
    """Records calls; fails while ``failing`` is set."""

    address = "unix:path=/memory"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[UnitProperty, ...]]] = []
        self.failing = ""

    def set_unit_properties(self, unit: str, properties: Sequence[UnitProperty]) -> None:
        if self.failing:
            raise SystemdBusError(self.failing)
        self.calls.append((unit, tuple(properties)))

    def version(self) -> str:
        if self.failing:
            raise SystemdBusError(self.failing)
        return "257.9-1"


# --- which cgroups are units ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "unit"),
    [
        (POD_DIR, POD_UNIT),
        ("kubepods.slice/kubepods-pod1.slice", "kubepods-pod1.slice"),
        ("kubepods.slice", "kubepods.slice"),
        (f"{POD_DIR}/cri-containerd-abc.scope", "cri-containerd-abc.scope"),
        ("system.slice/containerd.service", None),  # a service is not what we set
        ("kubepods/besteffort/pod1", None),  # cgroupfs driver
        ("kubepods.slice/other-pod1.slice", None),  # not named after its parent slice
        ("kubepods.slice/kubepods-a-b.slice", None),  # a skipped level
        ("kubepods-.slice", None),
        ("", None),
    ],
)
def test_unit_names_follow_systemds_slice_naming(rel: str, unit: str | None) -> None:
    assert unit_name(PurePosixPath(rel)) == unit


# --- runc's mapping (libcontainer/cgroups/systemd: addCpuQuota, unifiedResToSystemdProps) ---


@pytest.mark.parametrize(
    ("file", "text", "period", "props"),
    [
        ("cpu.weight", "39", None, [("CPUWeight", 39)]),
        ("memory.max", "201326592", None, [("MemoryMax", 201326592)]),
        ("memory.max", "max", None, [("MemoryMax", UINT64_MAX)]),
        ("cpu.max", "max", 100000, [("CPUQuotaPerSecUSec", UINT64_MAX)]),
        ("cpu.max", "100000", 100000, [("CPUQuotaPerSecUSec", 1_000_000)]),
        ("cpu.max", "150000", None, [("CPUQuotaPerSecUSec", 1_500_000)]),
        # Not a whole per cent of a CPU second: rounded up, as runc does (systemd keeps CPUQuota
        # as a percentage, so a child's exact quota still fits under it).
        ("cpu.max", "12345", 100000, [("CPUQuotaPerSecUSec", 130_000)]),
        ("cpu.max", "1000", 100000, [("CPUQuotaPerSecUSec", 10_000)]),
        # Another period than the default: said too, or systemd writes back 100 ms.
        ("cpu.max", "50000", 50000,
         [("CPUQuotaPeriodUSec", 50000), ("CPUQuotaPerSecUSec", 1_000_000)]),
        ("cpu.max", "max", 20000,
         [("CPUQuotaPeriodUSec", 20000), ("CPUQuotaPerSecUSec", UINT64_MAX)]),
        ("cpu.idle", "1", None, []),  # no property: direct writes only
        ("cpu.bvt_warp_ns", "2", None, []),
    ],
)  # fmt: skip
def test_file_values_map_to_properties_as_runc_maps_them(
    file: str, text: str, period: int | None, props: list[tuple[str, int]]
) -> None:
    got = properties_for(file, text, period)
    assert [(p.name, p.value) for p in got] == props
    assert all(p.signature == "t" for p in got)


def test_property_text() -> None:
    assert str(UnitProperty("CPUWeight", 39)) == "CPUWeight=39"
    assert str(UnitProperty("MemoryMax", UINT64_MAX)) == "MemoryMax=infinity"


# --- the bus states: one warning when calls start failing -----------------------------------


def test_calls_fall_back_with_one_warning_and_recover(caplog: pytest.LogCaptureFixture) -> None:
    bus = MemoryBus()
    results: list[str] = []
    units = SystemdUnits(PropertiesMode.ON, bus, observe=results.append)
    units.probe()
    assert units.state is BusState.WORKING and units.systemd_version == "257.9-1"
    props = properties_for("cpu.weight", "39", None)
    assert units.set(POD_UNIT, props)
    bus.failing = "org.freedesktop.DBus.Error.AccessDenied: Permission denied"
    with caplog.at_level(logging.INFO, "policy_server.node.unit_properties"):
        assert not units.set(POD_UNIT, props)
        assert not units.set(POD_UNIT, props)
        bus.failing = ""
        assert units.set(POD_UNIT, props)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "AccessDenied" in warnings[0].getMessage()
    assert any("set again" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)
    assert results == ["ok", "failed", "failed", "ok"]
    assert units.state is BusState.WORKING and units.reason == ""


def test_auto_turns_off_when_systemd_does_not_answer_at_start_up() -> None:
    bus = MemoryBus()
    bus.failing = "/run/dbus/system_bus_socket: No such file or directory"
    units = SystemdUnits(PropertiesMode.AUTO, bus)
    units.probe()
    assert units.state is BusState.OFF and "No such file" in units.reason
    bus.failing = ""
    assert not units.set(POD_UNIT, properties_for("cpu.weight", "39", None))
    assert bus.calls == []


def test_on_keeps_trying_after_a_failed_probe() -> None:
    bus = MemoryBus()
    bus.failing = "no answer in 1 s"
    units = SystemdUnits(PropertiesMode.ON, bus)
    units.probe()
    assert units.state is BusState.FAILING
    bus.failing = ""
    assert units.set(POD_UNIT, properties_for("cpu.weight", "39", None))


def test_off_never_calls() -> None:
    bus = MemoryBus()
    units = SystemdUnits(PropertiesMode.OFF, bus)
    units.probe()
    assert not units.set(POD_UNIT, properties_for("cpu.weight", "39", None))
    assert bus.calls == [] and units.to_json()["state"] == "off"


# --- the executor: properties first, one call per unit, the files written either way --------


def v2_tree(root: Path, cpu_max: str = "max 100000") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpu memory\n")
    pod = root / POD_DIR
    pod.mkdir(parents=True)
    for name, value in (("cpu.weight", "1"), ("cpu.max", cpu_max), ("memory.max", "max")):
        (pod / name).write_text(value + "\n")
    (pod / "cpu.idle").write_text("0\n")
    return root


def writes(parent: str = POD_UNIT) -> list[CgroupWrite]:
    return [
        CgroupWrite(parent, "cpu.shares", 512, "default/be"),
        CgroupWrite(parent, "cpu.cfs_quota_us", 150000, "default/be"),
        CgroupWrite(parent, "memory.limit_in_bytes", 201326592, "default/be"),
        CgroupWrite(parent, "cpu.idle", 1, "default/be"),
    ]


def executor(
    root: Path, bus: MemoryBus, mode: PropertiesMode = PropertiesMode.AUTO
) -> NodeExecutor:
    return NodeExecutor(
        ExecutorMode.ON, root, CgroupVersion.AUTO,
        weights=CpuWeights(WeightSetting.LINEAR), units=SystemdUnits(mode, bus),
    )  # fmt: skip


def test_executor_sets_one_unit_call_and_writes_every_file(tmp_path: Path) -> None:
    bus = MemoryBus()
    ex = executor(v2_tree(tmp_path), bus)
    ex.probe()
    report = ex.apply(writes())
    assert bus.calls == [(POD_UNIT, (
        UnitProperty("CPUWeight", 20),  # shares 512, the linear formula
        UnitProperty("CPUQuotaPerSecUSec", 1_500_000),
        UnitProperty("MemoryMax", 201326592),
    ))]  # fmt: skip
    assert report.properties == [
        f"{POD_UNIT} CPUWeight=20",
        f"{POD_UNIT} CPUQuotaPerSecUSec=1500000",
        f"{POD_UNIT} MemoryMax=201326592",
    ]
    pod = tmp_path / POD_DIR
    assert len(report.written) == 4 and not report.failed
    assert (pod / "cpu.weight").read_text() == "20"
    assert (pod / "cpu.max").read_text() == "150000"
    assert (pod / "cpu.idle").read_text() == "1"


def test_executor_keeps_a_non_default_period(tmp_path: Path) -> None:
    bus = MemoryBus()
    ex = executor(v2_tree(tmp_path, cpu_max="max 50000"), bus)
    ex.apply([CgroupWrite(POD_UNIT, "cpu.cfs_quota_us", 25000, "default/be")])
    assert bus.calls == [(POD_UNIT, (
        UnitProperty("CPUQuotaPeriodUSec", 50000),
        UnitProperty("CPUQuotaPerSecUSec", 500_000),
    ))]  # fmt: skip


def test_executor_writes_files_when_the_bus_fails(tmp_path: Path) -> None:
    bus = MemoryBus()
    ex = executor(v2_tree(tmp_path), bus, PropertiesMode.ON)
    bus.failing = f"org.freedesktop.systemd1.NoSuchUnit: Unit {POD_UNIT} not loaded."
    report = ex.apply(writes())
    assert report.properties == [] and len(report.written) == 4 and not report.failed
    assert ex.units.state is BusState.FAILING


def test_executor_leaves_cgroupfs_paths_and_v1_alone(tmp_path: Path) -> None:
    bus = MemoryBus()
    root = v2_tree(tmp_path / "v2")
    (root / "kubepods/besteffort/pod1").mkdir(parents=True)
    executor(root, bus).apply(writes("/kubepods/besteffort/pod1"))
    assert bus.calls == []
    v1 = tmp_path / "v1"
    (v1 / "cpu" / POD_DIR).mkdir(parents=True)
    ex = executor(v1, bus)
    ex.probe()
    assert ex.units.state is BusState.OFF and "cgroup v1" in ex.units.reason
    ex.apply(writes())
    assert bus.calls == []


def test_dry_run_sets_no_properties(tmp_path: Path) -> None:
    bus = MemoryBus()
    ex = executor(v2_tree(tmp_path), bus)
    ex.mode = ExecutorMode.DRY_RUN
    ex.apply(writes())
    assert bus.calls == []
