"""The runtime's overlay rule (bridge.contract.resource_overlay), and the state cache using it
on every path an answer reaches a container: the CreateContainer adjustment, the UpdateContainer
reply, an unsolicited update (issue 33, item 5: MergeFrom appended hugepage limits)."""

from __future__ import annotations

from pathlib import Path

from bridge.contract.catalogue import NriEvent
from bridge.contract.resource_overlay import RULES, overlay_resources
from bridge.nri.cache import StateCache
from bridge.proto.nri import api_pb2 as api

GIB = 1 << 30


def _resources() -> api.LinuxResources:
    """What a container has before our answer: a 2M and a 1G hugepage limit, one device rule,
    one unified key, CPU shares and a memory limit."""
    r = api.LinuxResources()
    r.cpu.shares.value = 2
    r.cpu.cpus = "0-1"
    r.memory.limit.value = GIB
    r.hugepage_limits.add(page_size="2MB", limit=GIB)
    r.hugepage_limits.add(page_size="1GB", limit=2 * GIB)
    r.devices.add(allow=False, access="rwm")
    r.unified["memory.high"] = "max"
    r.unified["cpu.idle"] = "0"
    return r


def _change() -> api.LinuxResources:
    c = api.LinuxResources()
    c.cpu.shares.value = 512
    c.memory.limit.value = 2 * GIB
    c.hugepage_limits.add(page_size="2MB", limit=4 * GIB)
    c.devices.add(allow=True, type="c", access="rw")
    c.devices[0].major.value = 10
    c.devices[0].minor.value = 200
    c.unified["cpu.idle"] = "1"
    c.pids.limit = 100
    c.rdt_class.value = "gold"
    return c


def _assert_overlaid(r: api.LinuxResources) -> None:
    assert (r.cpu.shares.value, r.cpu.cpus, r.memory.limit.value) == (512, "0-1", 2 * GIB)
    # one limit per page size (the change's 2MB replaced, the 1GB kept), never a second 2MB
    assert [(h.page_size, h.limit) for h in r.hugepage_limits] == [
        ("2MB", 4 * GIB), ("1GB", 2 * GIB)]
    # device cgroup rules appended after the deny-all, as runtime-tools' AddLinuxResourcesDevice
    assert [(d.allow, d.access) for d in r.devices] == [(False, "rwm"), (True, "rw")]
    assert dict(r.unified) == {"memory.high": "max", "cpu.idle": "1"}
    assert (r.pids.limit, r.rdt_class.value) == (100, "gold")


def test_every_linux_resources_field_has_a_rule() -> None:
    assert set(RULES) == {f.name for f in api.LinuxResources.DESCRIPTOR.fields}


def test_overlay_replaces_set_scalars_upserts_page_sizes_merges_keys_appends_rules() -> None:
    current = _resources()
    overlay_resources(current, _change())
    _assert_overlaid(current)


def test_an_empty_change_changes_nothing() -> None:
    current = _resources()
    overlay_resources(current, api.LinuxResources())
    assert current == _resources()


def _cache_with(cid: str) -> tuple[StateCache, api.PodSandbox, api.Container]:
    cache = StateCache()
    pod = api.PodSandbox(id="p")
    container = api.Container(id=cid, pod_sandbox_id="p")
    container.linux.resources.CopyFrom(_resources())
    cache.observe(NriEvent.CREATE_CONTAINER, pod, container)
    return cache, pod, container


def test_cache_create_container_adjustment() -> None:
    cache, pod, container = _cache_with("c1")
    resp = api.CreateContainerResponse()
    resp.adjust.linux.resources.CopyFrom(_change())
    cache.apply_answer(NriEvent.CREATE_CONTAINER,
                       api.CreateContainerRequest(pod=pod, container=container), resp)
    _assert_overlaid(cache.containers["c1"].linux.resources)


def test_cache_update_container_reply() -> None:
    cache, pod, container = _cache_with("c1")
    req = api.UpdateContainerRequest(pod=pod, container=container)
    req.linux_resources.cpu.shares.value = 256         # kubelet's resize: CRI's fields only
    req.linux_resources.memory.limit.value = 2 * GIB
    answer = api.UpdateContainerResponse()
    mine = answer.update.add(container_id="c1")
    mine.linux.resources.CopyFrom(_change())
    cache.apply_answer(NriEvent.UPDATE_CONTAINER, req, answer)
    _assert_overlaid(cache.containers["c1"].linux.resources)


def test_cache_unsolicited_update() -> None:
    cache, _, _ = _cache_with("c1")
    update = api.ContainerUpdate(container_id="c1")
    update.linux.resources.CopyFrom(_change())
    cache.apply_updates([update])
    _assert_overlaid(cache.containers["c1"].linux.resources)


def test_cache_update_for_another_container_in_a_create_answer() -> None:
    cache, pod, _ = _cache_with("c0")
    new = api.Container(id="c1", pod_sandbox_id="p")
    cache.observe(NriEvent.CREATE_CONTAINER, pod, new)
    resp = api.CreateContainerResponse()
    resp.update.add(container_id="c0").linux.resources.CopyFrom(_change())
    cache.apply_answer(NriEvent.CREATE_CONTAINER,
                       api.CreateContainerRequest(pod=pod, container=new), resp)
    _assert_overlaid(cache.containers["c0"].linux.resources)


def test_one_overlay_rule_for_the_cache_the_simulator_and_the_test_kit() -> None:
    """Issue 44.4: the bridge's state cache kept 2 device rules where the simulator and the test
    kit (bridge.runtime_facts.apply) kept 1, from two functions named `overlay_resources`. One
    rule now: the same update and the same adjustment give the same resources in both."""
    from bridge.runtime_facts import apply

    cache, _, container = _cache_with("c1")
    update = api.ContainerUpdate(container_id="c1")
    update.linux.resources.CopyFrom(_change())
    cache.apply_updates([update])
    simulated = api.Container()
    simulated.CopyFrom(container)
    apply.apply_update(simulated, update)
    assert simulated.linux.resources == cache.containers["c1"].linux.resources
    _assert_overlaid(simulated.linux.resources)

    adjust = api.ContainerAdjustment()
    adjust.linux.resources.CopyFrom(_change())
    created = apply.apply_adjustment(container, adjust)
    _assert_overlaid(created.linux.resources)
    assert vars(apply)["overlay_resources"] is overlay_resources


def test_overlay_resources_is_defined_once() -> None:
    root = Path(__file__).resolve().parents[3]
    defining = sorted(str(p.relative_to(root)) for p in (root / "bridge").rglob("*.py")
                      if "def overlay_resources(" in p.read_text())
    assert defining == ["bridge/contract/resource_overlay.py"]
