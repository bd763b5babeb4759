"""Which route unsolicited updates take, and how a wrong or missing CRI socket is reported."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bridge.config_file import load_text
from bridge.contract.nri_version import nri_version_of
from bridge.cri.runtime_service import CriClient, CriError
from bridge.errors import BridgeError, ConfigError
from bridge.nri.event_call import RuntimeInfo
from bridge.nri.handler_api import Handler
from bridge.nri.update_routes import (
    CRI_ROUTE,
    NRI_ROUTE,
    CriRoute,
    NriRoute,
    Unroutable,
    UpdateSettings,
    choose_route,
)
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import SimulatedRuntime
from bridge.simulator.cri_server import serve_cri
from bridge.simulator.synthetic import synthetic_state

from .harness import connected


def runtime(name: str, version: str, nri: str = "") -> RuntimeInfo:
    return RuntimeInfo(name, version, nri_version_of(name, version, nri), "", 5.0, 2.0)


async def never_called(request: api.UpdateContainersRequest, timeout_s: float,
                       ) -> api.UpdateContainersResponse:
    raise AssertionError("UpdateContainers must not be called")


@pytest.mark.parametrize(("name", "version", "nri", "route"), [
    ("containerd", "1.7.24~ds1", "", CRI_ROUTE),  # NRI v0.6.1
    ("containerd", "2.1.9+unknown", "", CRI_ROUTE),  # v0.8.0
    ("containerd", "v2.2.7", "", CRI_ROUTE),  # v0.11.0
    ("containerd", "v2.3.4", "v0.12.0", CRI_ROUTE),
    ("containerd", "v2.3.9", "v0.12.1", NRI_ROUTE),  # the fix, as reported
    ("containerd", "v2.4.0-beta.0", "v0.12.1", NRI_ROUTE),  # as recorded
    ("containerd", "v2.4.0-beta.0", "", NRI_ROUTE),
    ("containerd", "v2.4.0", "", NRI_ROUTE),  # GA: v0.12.3
    ("containerd", "2.4.0-beta+unknown", "", CRI_ROUTE),  # a dev build: not known to be fixed
    ("containerd", "v2.3.0-rc.1", "", CRI_ROUTE),  # the 2.3 LTS line has no backport
    ("v2", "v2.4.1", "v0.12.2", NRI_ROUTE),
    ("cri-o", "1.36.3", "", CRI_ROUTE),
    ("cri-o", "1.37.0", "", CRI_ROUTE),  # NRI v0.12.0: the same lock order
    ("cri-o", "1.37.0", "v0.12.0", CRI_ROUTE),
    ("cri-o", "1.40.0", "v0.13.0", CRI_ROUTE),  # CRI-O: not checked against the fix
])
def test_auto_takes_cri_wherever_update_containers_can_deadlock(
        name: str, version: str, nri: str, route: str) -> None:
    chosen = choose_route(UpdateSettings(), runtime(name, version, nri), never_called,
                          lambda _: None)
    assert chosen.name == route  # type: ignore[attr-defined]
    if isinstance(chosen, CriRoute):
        expected = "/var/run/crio/crio.sock" if name == "cri-o" else \
            "/run/containerd/containerd.sock"
        assert chosen.client.socket_path == expected


def test_settings_force_a_route_and_name_the_socket(caplog: pytest.LogCaptureFixture) -> None:
    old = runtime("containerd", "1.7.24~ds1")
    with caplog.at_level(logging.WARNING):
        forced = choose_route(UpdateSettings(route="nri"), old, never_called, lambda _: None)
    assert isinstance(forced, NriRoute)
    assert any("can deadlock" in r.getMessage() for r in caplog.records)
    fixed = runtime("containerd", "v2.4.0")
    cri = choose_route(UpdateSettings(route="cri", cri_socket="/x/cri.sock"), fixed,
                       never_called, lambda _: None)
    assert isinstance(cri, CriRoute) and cri.client.socket_path == "/x/cri.sock"


async def test_an_unknown_runtime_without_a_cri_socket_fails_every_update_saying_why() -> None:
    route = choose_route(UpdateSettings(), runtime("mystery", "1.0"), never_called,
                         lambda _: None)
    assert isinstance(route, Unroutable)
    with pytest.raises(BridgeError, match=r"set updates\.cri_socket"):
        await route([api.ContainerUpdate(container_id="c")])


async def test_a_missing_cri_socket_is_a_clear_error(tmp_path: Path) -> None:
    client = CriClient(str(tmp_path / "absent.sock"))
    with pytest.raises(CriError, match="no CRI socket at"):
        await client.version()


async def test_a_cri_socket_of_another_runtime_is_refused(sock_path: Path) -> None:
    """The bridge is registered with containerd 1.7.24; the socket serves 2.1.9."""
    pods, containers = synthetic_state(1, 1)
    cri_sock = sock_path.with_name("other.cri")
    other = serve_cri(SimulatedRuntime(sock_path.with_name("other.nri"), "containerd-2.1.9"),
                      cri_sock)
    other.state.seed(pods, containers)
    await other.start()
    try:
        route = CriRoute(CriClient(str(cri_sock)), lambda _: None,
                         runtime("containerd", "1.7.24~ds1"))
        update = api.ContainerUpdate(container_id=containers[0].id)
        update.linux.resources.cpu.shares.value = 7
        with pytest.raises(BridgeError, match=r"serves containerd 2\.1\.9"):
            await route([update])
        assert other.updates == []  # nothing reached the other runtime
        route.client.close()
    finally:
        await other.stop()


async def test_a_refused_update_is_failed_unless_it_may_fail(sock_path: Path) -> None:
    async with connected(sock_path, Handler()) as h:
        gone = api.ContainerUpdate(container_id="gone")
        gone.linux.resources.cpu.shares.value = 3
        quiet = api.ContainerUpdate(container_id="gone-too", ignore_failure=True)
        quiet.linux.resources.cpu.shares.value = 3
        outcome = await h.runner.update_containers([gone, quiet])
        assert [u.container_id for u in outcome.failed] == ["gone"]
        assert outcome.applied == []


def test_the_updates_section_of_the_config() -> None:
    config = load_text("updates: {route: cri, cri_socket: /run/k3s/containerd.sock}\n", "f")
    assert config.updates == UpdateSettings("cri", "/run/k3s/containerd.sock")
    assert load_text("{}", "f").updates == UpdateSettings()
    for text, key in [("updates: {route: sometimes}", "updates.route"),
                      ("updates: {cri_socket: relative.sock}", "updates.cri_socket"),
                      ("updates: {socket: /x}", "updates.socket"),
                      ("updates: [cri]", "updates")]:
        with pytest.raises(ConfigError) as error:
            load_text(text, "f")
        assert error.value.key == key, text
