"""``SystemdBus``, and the policy server using it, against a real dbus-daemon (Debian's
``dbus-daemon``) on a private bus, where a tiny fake systemd owns ``org.freedesktop.systemd1``
and answers the manager's calls.

What is pinned: the message systemd gets (object, interface, member, signature ``sba(sv)``,
runtime true, uint64 variants), the ``Version`` property read, systemd's error replies and a
missing or vanished bus as ``SystemdBusError``, and a new connection after the bus came back.
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from jeepney import HeaderFields, MessageType, new_error, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import DBusConnection, open_dbus_connection

from policy_server.assemble import assemble
from policy_server.node.execution import ExecutorMode
from policy_server.node.systemd_bus import SystemdBus
from policy_server.node.unit_properties import (
    UINT64_MAX,
    PropertiesMode,
    SystemdBusError,
    UnitProperty,
)
from policy_server.service import ServerOptions
from tests.policy_server.factory import cgroup_v2_root, envelope, pod

DBUS_DAEMON = shutil.which("dbus-daemon")
pytestmark = [pytest.mark.processes, pytest.mark.skipif(
    DBUS_DAEMON is None, reason="needs Debian's dbus-daemon (apt-get install dbus-daemon)"
)]
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0

CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"""


class Bus:
    """A private dbus-daemon (stopped by its PID)."""

    def __init__(self, base: Path) -> None:
        self.socket = base / "bus.sock"
        self.address = f"unix:path={self.socket}"
        self.config = base / "bus.conf"
        self.config.write_text(CONFIG.format(socket=self.socket))
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        assert DBUS_DAEMON is not None
        self.proc = subprocess.Popen(
            [DBUS_DAEMON, f"--config-file={self.config}", "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: lines.put(self.proc.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
        # It prints its address once it listens.
        assert lines.get(timeout=START_TIMEOUT_S).startswith("unix:"), "dbus-daemon did not start"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.communicate(timeout=STOP_TIMEOUT_S)  # waits, and closes both pipes
            self.proc = None


@dataclass
class FakeSystemd:
    """Owns org.freedesktop.systemd1 and answers SetUnitProperties and Get(Version)."""

    address: str
    missing: set[str] = field(default_factory=set)  # units systemd says it has not loaded
    silent: set[str] = field(default_factory=set)  # units whose calls get no answer at all
    calls: queue.Queue[tuple[str, str, tuple[Any, ...]]] = field(default_factory=queue.Queue)
    stop: threading.Event = field(default_factory=threading.Event)

    def serve(self, ready: threading.Event) -> None:
        with open_dbus_connection(self.address) as conn:
            conn.send_and_get_reply(message_bus.RequestName("org.freedesktop.systemd1", 0))
            ready.set()
            while not self.stop.is_set():
                try:
                    msg = conn.receive(timeout=0.1)
                except TimeoutError:
                    continue
                if msg.header.message_type is MessageType.method_call:
                    self._answer(conn, msg)

    def _answer(self, conn: DBusConnection, msg: Any) -> None:
        fields = msg.header.fields
        member = fields[HeaderFields.member]
        signature = fields.get(HeaderFields.signature, "")
        self.calls.put((f"{fields[HeaderFields.interface]}.{member}", signature, msg.body))
        if member == "Get" and msg.body[1] == "Version":
            conn.send(new_method_return(msg, "v", (("s", "257.9-1~deb13u1"),)))
        elif member == "SetUnitProperties" and msg.body[0] in self.silent:
            return
        elif member == "SetUnitProperties" and msg.body[0] in self.missing:
            error = "org.freedesktop.systemd1.NoSuchUnit"
            conn.send(new_error(msg, error, "s", (f"Unit {msg.body[0]} not loaded.",)))
        else:
            conn.send(new_method_return(msg))


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[Bus]:
    daemon = Bus(tmp_path)
    daemon.start()
    yield daemon
    daemon.stop()


@pytest.fixture
def systemd(bus: Bus) -> Iterator[FakeSystemd]:
    fake = FakeSystemd(bus.address)
    ready = threading.Event()
    thread = threading.Thread(target=fake.serve, args=(ready,), daemon=True)
    thread.start()
    assert ready.wait(START_TIMEOUT_S), "the fake systemd did not get its name"
    yield fake
    fake.stop.set()
    thread.join(STOP_TIMEOUT_S)


def test_set_unit_properties_message(systemd: FakeSystemd) -> None:
    client = SystemdBus(systemd.address)
    props = [UnitProperty("CPUWeight", 20), UnitProperty("CPUQuotaPerSecUSec", UINT64_MAX)]
    client.set_unit_properties("kubepods-besteffort-pod1.slice", props)
    name, signature, body = systemd.calls.get(timeout=START_TIMEOUT_S)
    assert name == "org.freedesktop.systemd1.Manager.SetUnitProperties"
    assert signature == "sba(sv)"
    assert body == (
        "kubepods-besteffort-pod1.slice",
        True,  # runtime: lost on reboot, like the pod slice itself
        [("CPUWeight", ("t", 20)), ("CPUQuotaPerSecUSec", ("t", UINT64_MAX))],
    )
    client.close()


def test_version(systemd: FakeSystemd) -> None:
    client = SystemdBus(systemd.address)
    assert client.version() == "257.9-1~deb13u1"
    name, _signature, body = systemd.calls.get(timeout=START_TIMEOUT_S)
    assert name == "org.freedesktop.DBus.Properties.Get"
    assert body == ("org.freedesktop.systemd1.Manager", "Version")
    client.close()


def test_systemds_error_reply_is_a_bus_error(systemd: FakeSystemd) -> None:
    systemd.missing.add("kubepods-gone.slice")
    client = SystemdBus(systemd.address)
    with pytest.raises(SystemdBusError, match=r"NoSuchUnit: Unit kubepods-gone.slice not loaded"):
        client.set_unit_properties("kubepods-gone.slice", [UnitProperty("CPUWeight", 2)])
    # The connection is fine after an error reply: the next call goes through.
    client.set_unit_properties("kubepods-ok.slice", [UnitProperty("CPUWeight", 2)])
    client.close()


def test_a_call_without_answer_ends_at_its_timeout(systemd: FakeSystemd) -> None:
    systemd.silent.add("kubepods-stuck.slice")
    client = SystemdBus(systemd.address, timeout_s=0.2)
    with pytest.raises(SystemdBusError, match=r"no answer in 0.2 s"):
        client.set_unit_properties("kubepods-stuck.slice", [UnitProperty("CPUWeight", 2)])
    # A late reply must not be taken for the next call's: the connection was dropped.
    client.set_unit_properties("kubepods-ok.slice", [UnitProperty("CPUWeight", 2)])
    client.close()


def test_no_systemd_on_the_bus(bus: Bus) -> None:
    client = SystemdBus(bus.address)
    with pytest.raises(SystemdBusError, match="ServiceUnknown"):
        client.version()
    client.close()


def test_no_bus(tmp_path: Path) -> None:
    client = SystemdBus(f"unix:path={tmp_path}/none.sock")
    with pytest.raises(SystemdBusError, match="No such file or directory"):
        client.version()


def test_unsupported_address() -> None:
    with pytest.raises(SystemdBusError, match="not supported"):
        SystemdBus("tcp:host=localhost,port=1").version()


def test_reconnects_after_the_bus_came_back(bus: Bus, tmp_path: Path) -> None:
    fake = FakeSystemd(bus.address)
    ready = threading.Event()
    thread = threading.Thread(target=fake.serve, args=(ready,), daemon=True)
    thread.start()
    assert ready.wait(START_TIMEOUT_S)
    client = SystemdBus(bus.address)
    assert client.version()
    fake.stop.set()
    thread.join(STOP_TIMEOUT_S)
    bus.stop()
    with pytest.raises(SystemdBusError):
        client.version()  # the old connection is gone: dropped, not used again
    bus.start()
    fake = FakeSystemd(bus.address)
    ready = threading.Event()
    thread = threading.Thread(target=fake.serve, args=(ready,), daemon=True)
    thread.start()
    assert ready.wait(START_TIMEOUT_S)
    assert client.version() == "257.9-1~deb13u1"
    fake.stop.set()
    thread.join(STOP_TIMEOUT_S)
    client.close()


# --- the policy server with the bus: a pod slice's values reach systemd and the files ------


def systemd_node(root: Path) -> Path:
    """A cgroup v2 tree where kubelet's systemd driver made an LSR pod's slice (0.5 CPU)."""
    cgroup_v2_root(root)
    slice_dir = root / "kubepods.slice" / "kubepods-podUID.slice"
    slice_dir.mkdir()
    (slice_dir / "cpu.max").write_text("50000 100000\n")
    return slice_dir


LSR_SANDBOX = envelope("RunPodSandbox", pod=pod(
    qos="LSR", annotations={"scheduling.koordinator.sh/resource-status": {"cpuset": "1"}},
    cgroup_parent="kubepods-podUID.slice"))  # fmt: skip


async def test_server_sets_the_slice_property_then_the_file(
    systemd: FakeSystemd, tmp_path: Path
) -> None:
    slice_dir = systemd_node(tmp_path / "cg")
    assembly = assemble(ServerOptions(
        executor_mode=ExecutorMode.ON, cgroup_root=tmp_path / "cg",
        systemd_properties=PropertiesMode.AUTO, system_bus=systemd.address))  # fmt: skip
    server = assembly.server
    server.probe_node()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=assembly.app),
                               base_url="http://policy")  # fmt: skip
    async with client:
        state = (await client.get("/v1/state")).json()["node_effects"]["systemd_properties"]
        assert state["state"] == "working" and state["systemd_driver"] is True, state
        reply = await client.post("/v1/policies/koordinator-qos", json=LSR_SANDBOX)
        assert reply.json() == {}
        metrics = (await client.get("/metrics")).text
    systemd.calls.get(timeout=START_TIMEOUT_S)  # the start-up probe's Version
    name, _signature, body = systemd.calls.get(timeout=START_TIMEOUT_S)
    assert name.endswith("SetUnitProperties")
    assert body == ("kubepods-podUID.slice", True, [("CPUQuotaPerSecUSec", ("t", UINT64_MAX))])
    assert (slice_dir / "cpu.max").read_text() == "max"
    assert 'policy_systemd_unit_property_calls_total{result="ok"} 1.0' in metrics


async def test_server_without_a_bus_says_so_once_and_writes_the_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    slice_dir = systemd_node(tmp_path / "cg")
    assembly = assemble(ServerOptions(
        executor_mode=ExecutorMode.ON, cgroup_root=tmp_path / "cg",
        systemd_properties=PropertiesMode.AUTO,
        system_bus=f"unix:path={tmp_path}/no-bus.sock"))  # fmt: skip
    server = assembly.server
    with caplog.at_level("INFO"):
        server.probe_node()
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=assembly.app),
                                   base_url="http://policy")  # fmt: skip
        async with client:
            for _ in range(2):
                assert (await client.post("/v1/policies/koordinator-qos",
                                          json=LSR_SANDBOX)).json() == {}  # fmt: skip
            state = (await client.get("/v1/state")).json()["node_effects"]["systemd_properties"]
    said = [r for r in caplog.records if "systemd unit properties" in r.getMessage()]
    # A systemd-driver node (kubepods.slice): worth a warning, once, at start-up only.
    assert [r.levelname for r in said] == ["WARNING"], [r.getMessage() for r in said]
    assert "No such file or directory" in said[0].getMessage()
    assert state["state"] == "off" and "no-bus.sock" in state["reason"]
    assert (slice_dir / "cpu.max").read_text() == "max"
