"""The NRI ContainerUpdate -> CRI UpdateContainerResources mapping (bridge.contract.cri_service)."""

from __future__ import annotations

import pytest

from bridge.contract.cri_service import (
    CARRIED,
    INT64_MAX,
    CriConversionError,
    set_resource_leaves,
    to_cri,
    to_nri,
)
from bridge.proto.cri import runtime_pb2 as cri
from bridge.proto.nri import api_pb2 as api


def update(**resources: object) -> api.ContainerUpdate:
    u = api.ContainerUpdate(container_id="c1")
    r = u.linux.resources
    for path, value in resources.items():
        sub, _, leaf = path.partition("__")
        target = getattr(r, sub) if leaf else r
        field = leaf or sub
        if isinstance(value, str) and field in ("cpus", "mems"):
            setattr(target, field, value)
        else:
            getattr(target, field).value = value
    return u


def test_every_carried_leaf_lands_in_its_cri_field() -> None:
    u = update(cpu__shares=512, cpu__quota=-1, cpu__period=100000, cpu__cpus="1-2",
               cpu__mems="0", memory__limit=1 << 30, memory__swap=2 << 30)
    u.linux.resources.hugepage_limits.add(page_size="2MB", limit=4 << 20)
    u.linux.resources.unified["memory.high"] = "max"
    converted = to_cri(u)
    linux = converted.request.linux
    assert converted.request.container_id == "c1"
    assert (linux.cpu_shares, linux.cpu_quota, linux.cpu_period) == (512, -1, 100000)
    assert (linux.cpuset_cpus, linux.cpuset_mems) == ("1-2", "0")
    assert (linux.memory_limit_in_bytes, linux.memory_swap_limit_in_bytes) == (1 << 30, 2 << 30)
    assert [(h.page_size, h.limit) for h in linux.hugepage_limits] == [("2MB", 4 << 20)]
    assert dict(linux.unified) == {"memory.high": "max"}
    assert linux.oom_score_adj == 0  # never set by an update
    assert converted.dropped == ()
    assert converted.carried == u


def test_leaves_cri_cannot_carry_are_dropped_and_removed_from_what_is_applied() -> None:
    u = update(cpu__shares=512, memory__reservation=1 << 20, memory__swappiness=10,
               cpu__realtime_runtime=5, rdt_class="gold", blockio_class="slow")
    u.linux.resources.pids.limit = 64
    converted = to_cri(u)
    assert sorted(converted.dropped) == ["blockio_class", "cpu.realtime_runtime",
                                         "memory.reservation", "memory.swappiness", "pids",
                                         "rdt_class"]
    kept = converted.carried.linux.resources
    assert set_resource_leaves(kept) == ["cpu.shares"]
    assert not kept.HasField("memory")  # an emptied sub-message is cleared, not left empty
    assert converted.request.linux.cpu_shares == 512


def test_only_dropped_leaves_leave_nothing_to_send() -> None:
    converted = to_cri(update(memory__swappiness=0))
    assert converted.dropped == ("memory.swappiness",)
    assert not converted.carried.linux.resources.ListFields()


def test_the_current_cpu_values_are_sent_with_the_update_over_them_memory_only_when_set() -> None:
    current = api.LinuxResources()
    current.cpu.shares.value = 1024
    current.cpu.quota.value = 50000
    current.cpu.period.value = 100000
    current.cpu.cpus = "0-3"
    current.memory.limit.value = 1 << 30
    converted = to_cri(update(cpu__cpus="2-3"), current)
    linux = converted.request.linux
    assert (linux.cpu_shares, linux.cpu_quota, linux.cpu_period, linux.cpuset_cpus) == (
        1024, 50000, 100000, "2-3")
    # Re-sending an unchanged limit would make the runtime reset swap to it.
    assert linux.memory_limit_in_bytes == 0 and linux.memory_swap_limit_in_bytes == 0
    assert set_resource_leaves(converted.carried.linux.resources) == ["cpu.cpus"]


def test_an_unsigned_value_above_int64_is_refused() -> None:
    with pytest.raises(CriConversionError, match=r"cpu\.shares"):
        to_cri(update(cpu__shares=INT64_MAX + 1))
    assert to_cri(update(cpu__shares=INT64_MAX)).request.linux.cpu_shares == INT64_MAX


def test_to_nri_leaves_zero_unset_and_round_trips_what_is_carried() -> None:
    linux = cri.LinuxContainerResources(cpu_shares=256, cpu_quota=-1, cpuset_cpus="3",
                                        memory_limit_in_bytes=1 << 29)
    resources = to_nri(linux)
    assert set_resource_leaves(resources) == ["memory.limit", "cpu.shares", "cpu.quota", "cpu.cpus"]
    assert not resources.cpu.HasField("period")
    back = to_cri(api.ContainerUpdate(container_id="x",
                                      linux=api.LinuxContainerUpdate(resources=resources)))
    assert back.request.linux == linux


def test_the_carried_set_matches_the_cri_message() -> None:
    """Each carried leaf has a CRI field; a field added to the table without one fails here."""
    names = set(cri.LinuxContainerResources.DESCRIPTOR.fields_by_name)
    assert {"hugepage_limits", "unified"} <= names
    assert len(CARRIED) == 9
