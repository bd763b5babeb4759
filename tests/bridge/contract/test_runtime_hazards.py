"""The table of reply fields that crash a runtime (bridge.contract.runtime_hazards), and what is
derived from it: `runtime.capabilities` and the simulator's profiles. The facts are the audit in
docs/protocol.md#reply-fields-that-crash-a-runtime (NRI's pkg/adaptation/result.go per tag)."""

from __future__ import annotations

import pytest

from bridge.contract.capabilities import capabilities
from bridge.contract.nri_version import Version
from bridge.contract.runtime_hazards import HAZARDS, clear_at, hazards_for
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.profiles import PROFILES

# The NRI versions the runtimes we support embed (docs/protocol.md#compatibility-matrix).
SAFE: tuple[Version, ...] = ((0, 6, 1), (0, 8, 0), (0, 10, 0), (0, 12, 0), (0, 12, 1), (0, 12, 2))
SYSCTL_PANICS: tuple[Version, ...] = ((0, 11, 0),)


@pytest.mark.parametrize("nri", SAFE)
def test_no_hazard_outside_nri_v0_11(nri: Version) -> None:
    assert hazards_for(nri) == ()


@pytest.mark.parametrize("nri", SYSCTL_PANICS)
def test_an_added_sysctl_crashes_nri_v0_11(nri: Version) -> None:
    assert [row.path for row in hazards_for(nri)] == ["linux.sysctl"]
    [row] = hazards_for(nri)
    assert row.panic == "panic: assignment to entry in nil map"
    assert "adjustSysctl" in row.upstream and "a7dd8b0" in row.upstream


def test_an_unknown_nri_version_counts_as_affected() -> None:
    # A runtime that does not say is older than v0.12.0 (or a development build).
    assert hazards_for(None) == HAZARDS


def test_what_sets_the_sysctl_hazard_off() -> None:
    [row] = HAZARDS
    added = api.ContainerAdjustment()
    added.linux.sysctl["net.core.somaxconn"] = "1024"
    replaced = api.ContainerAdjustment()
    replaced.linux.sysctl.update({"-net.core.somaxconn": "", "net.core.somaxconn": "1"})
    removed = api.ContainerAdjustment()
    removed.linux.sysctl["-net.core.somaxconn"] = ""
    other = api.ContainerAdjustment()
    other.linux.cgroups_path = "/x"
    assert row.set_off_by(added)
    assert row.set_off_by(replaced)  # the replace path writes the nil map too
    assert not row.set_off_by(removed)  # a removal alone goes into the annotations
    assert not row.set_off_by(other)
    assert not row.set_off_by(api.ContainerAdjustment())


def test_capabilities_leave_out_what_would_crash_the_runtime() -> None:
    v0_11, v0_12 = capabilities((0, 11, 0)), capabilities((0, 12, 0))
    assert v0_11 is not None and v0_12 is not None
    assert "linux.sysctl" not in v0_11
    assert {"linux.net_devices", "linux.scheduler", "linux.rdt"} <= set(v0_11)
    assert "linux.sysctl" in v0_12
    assert set(v0_12) - set(v0_11) == {"linux.sysctl", "linux.memory_policy"}


def test_the_profiles_crash_where_their_nri_version_does() -> None:
    crashing = {key for key, profile in PROFILES.items() if profile.hazards}
    assert crashing == {"containerd-2.2.7", "cri-o-1.36.3"}


def test_clear_at_removes_the_field_and_the_parents_it_empties() -> None:
    only = api.ContainerAdjustment()
    only.linux.sysctl["k"] = "v"
    clear_at(only, "linux.sysctl")
    assert not only.HasField("linux")
    more = api.ContainerAdjustment()
    more.linux.sysctl["k"] = "v"
    more.linux.cgroups_path = "/x"
    clear_at(more, "linux.sysctl")
    assert more.linux.cgroups_path == "/x" and not more.linux.sysctl
