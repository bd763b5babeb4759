"""The simulated runtime crashes where the real one does
(docs/protocol.md#reply-fields-that-crash-a-runtime).

A plugin (our plugin core with a plain handler, no bridge in between) answers CreateContainer
with a sysctl. NRI v0.11.0 panics merging an added one whatever sysctls the container already
has (containerd 2.2.7, CRI-O 1.36.3); a removal alone does not panic; NRI v0.12.0 on
(containerd 2.3.4 and 2.4, CRI-O 1.37) applies it. So a bridge that lets an added sysctl through
to a v0.11 profile fails its tests with a crashed runtime rather than a silently applied field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.nri.handler_api import EventContext, Handler
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import SimulatorError
from bridge.simulator.synthetic import template

from .harness import connected

PANIC = "panic: assignment to entry in nil map"


class Sysctl(Handler):
    def __init__(self, sysctl: dict[str, str]) -> None:
        self.sysctl = sysctl

    async def create_container(self, ctx: EventContext, req: Any) -> api.CreateContainerResponse:
        rsp = api.CreateContainerResponse()
        rsp.adjust.linux.sysctl.update(self.sysctl)
        rsp.adjust.env.add(key="SEEN", value="1")
        return rsp


@pytest.mark.parametrize("profile", ["containerd-2.2.7", "cri-o-1.36.3"])
@pytest.mark.parametrize("existing", [{}, {"net.ipv4.ip_forward": "1"}],
                         ids=["no-sysctls", "has-sysctls"])
async def test_an_added_sysctl_crashes_nri_v0_11(tmp_path: Path, profile: str,
                                                 existing: dict[str, str]) -> None:
    async with connected(tmp_path / "nri.sock", Sysctl({"net.core.somaxconn": "1024"}),
                         profile, name="tuner") as h:
        pod, container = template()
        container.linux.sysctl.update(existing)
        result = await h.runtime.create_container(pod, container)
        assert result.error is not None
        assert result.error.startswith(f"runtime crashed: {PANIC} merging linux.sysctl "
                                       "from plugin 10-tuner (NRI v0.11.0 ")
        assert h.runtime.crashed is not None
        assert not h.runtime.running  # no listener: the process is gone
        assert h.conn.lifecycle.closed  # and every plugin with it
        assert container.id not in h.runtime.state.containers
        with pytest.raises(SimulatorError, match="crashed"):
            await h.runtime.create_container(pod, container)


async def test_a_sysctl_removal_alone_does_not_crash_nri_v0_11(tmp_path: Path) -> None:
    async with connected(tmp_path / "nri.sock", Sysctl({"-net.ipv4.ip_forward": ""}),
                         "containerd-2.2.7") as h:
        pod, container = template()
        result = await h.runtime.create_container(pod, container)
        assert result.ok, result.error
        assert h.runtime.crashed is None


@pytest.mark.parametrize("profile", ["containerd-2.3.4", "containerd-2.4.0-beta.0",
                                     "containerd-2.4.0", "cri-o-1.37.0"])
async def test_an_added_sysctl_is_applied_by_nri_v0_12(tmp_path: Path, profile: str) -> None:
    async with connected(tmp_path / "nri.sock", Sysctl({"net.core.somaxconn": "1024"}),
                         profile) as h:
        pod, container = template()
        result = await h.runtime.create_container(pod, container)
        assert result.ok, result.error
        assert h.runtime.crashed is None
        created = h.runtime.state.containers[container.id]
        assert dict(created.linux.sysctl) == {"net.core.somaxconn": "1024"}


async def test_a_crashed_runtime_starts_again(tmp_path: Path) -> None:
    async with connected(tmp_path / "nri.sock", Sysctl({"net.core.somaxconn": "1024"}),
                         "containerd-2.2.7", index="10") as h:
        pod, container = template()
        assert not (await h.runtime.create_container(pod, container)).ok
        await h.runtime.start()  # a restarted runtime; the plugin reconnects by itself
        conn = await h.runtime.wait_plugin(5.0)
        assert h.runtime.crashed is None
        assert conn.label == "10-test"
