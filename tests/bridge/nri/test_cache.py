"""The state cache follows events and shows the resources we made effective."""

from __future__ import annotations

from bridge.contract.catalogue import NriEvent
from bridge.nri.cache import StateCache
from bridge.proto.nri import api_pb2 as api


def _container(cid: str, shares: int) -> api.Container:
    c = api.Container(id=cid, pod_sandbox_id="p", name=cid)
    c.linux.resources.cpu.shares.value = shares
    return c


def test_lifecycle_states_and_removal() -> None:
    cache = StateCache()
    pod = api.PodSandbox(id="p", name="web", namespace="default")
    cache.observe(NriEvent.RUN_POD_SANDBOX, pod, None)
    req = api.CreateContainerRequest(pod=pod, container=_container("c1", 2))
    cache.observe(NriEvent.CREATE_CONTAINER, req.pod, req.container)
    assert cache.containers["c1"].state == api.CONTAINER_CREATED
    assert req.container.state == api.CONTAINER_UNKNOWN  # the request itself is untouched
    cache.observe(NriEvent.START_CONTAINER, pod, req.container)
    assert cache.containers["c1"].state == api.CONTAINER_RUNNING
    cache.observe(NriEvent.REMOVE_CONTAINER, pod, req.container)
    assert "c1" not in cache.containers and "p" in cache.pods
    cache.observe(NriEvent.REMOVE_POD_SANDBOX, pod, None)
    assert not cache.pods


def test_create_adjustment_and_update_answers_are_folded_in() -> None:
    cache = StateCache()
    pod = api.PodSandbox(id="p")
    other = _container("c0", 100)
    cache.observe(NriEvent.CREATE_CONTAINER, pod, other)
    req = api.CreateContainerRequest(pod=pod, container=_container("c1", 2))
    cache.observe(NriEvent.CREATE_CONTAINER, req.pod, req.container)
    resp = api.CreateContainerResponse()
    resp.adjust.linux.resources.cpu.cpus = "2-3"
    resp.adjust.linux.resources.cpu.quota.value = -1
    upd = resp.update.add(container_id="c0")
    upd.linux.resources.cpu.shares.value = 700
    cache.apply_answer(NriEvent.CREATE_CONTAINER, req, resp)
    cpu = cache.containers["c1"].linux.resources.cpu
    assert (cpu.cpus, cpu.quota.value, cpu.shares.value) == ("2-3", -1, 2)
    assert cache.containers["c0"].linux.resources.cpu.shares.value == 700

    update_req = api.UpdateContainerRequest(pod=pod, container=cache.containers["c1"])
    update_req.linux_resources.cpu.shares.value = 512
    update_req.linux_resources.memory.limit.value = 1 << 30
    answer = api.UpdateContainerResponse()
    mine = answer.update.add(container_id="c1")
    mine.linux.resources.cpu.cpus = "4-5"
    cache.observe(NriEvent.UPDATE_CONTAINER, pod, update_req.container)
    cache.apply_answer(NriEvent.UPDATE_CONTAINER, update_req, answer)
    res = cache.containers["c1"].linux.resources
    assert (res.cpu.shares.value, res.cpu.cpus, res.memory.limit.value) == (512, "4-5", 1 << 30)


def test_unsolicited_updates_merge_and_unknown_ids_are_ignored() -> None:
    cache = StateCache()
    cache.observe(NriEvent.CREATE_CONTAINER, api.PodSandbox(id="p"), _container("c1", 2))
    u1 = api.ContainerUpdate(container_id="c1")
    u1.linux.resources.cpu.cpus = "0-1"
    cache.apply_updates([u1, api.ContainerUpdate(container_id="ghost")])
    assert cache.containers["c1"].linux.resources.cpu.cpus == "0-1"
    assert "ghost" not in cache.containers
