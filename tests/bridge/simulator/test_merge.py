"""Merge rules of docs/protocol.md#ownership-and-conflicts (sans-IO): CreateResult, UpdateResult,
apply_adjustment."""

from __future__ import annotations

import pytest

from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.apply import apply_adjustment
from bridge.simulator.ownership import Ownership
from bridge.simulator.result_merge import CreateResult, MergeError, UpdateResult
from bridge.simulator.sync import SyncSplitter, SyncTooLarge


def container() -> api.Container:
    c = api.Container(id="c1", name="app", env=["PATH=/bin", "HTTP_PROXY=http://proxy"],
                      annotations={"keep": "1", "drop": "2"})
    c.mounts.add(destination="/data", source="/src/data", type="bind")
    c.mounts.add(destination="/proc", type="proc", source="proc")
    c.linux.devices.add(path="/dev/fuse", type="c", major=10, minor=229)
    c.linux.namespaces.add(type="network", path="/proc/1/ns/net")
    c.linux.resources.cpu.shares.value = 256
    c.linux.resources.memory.limit.value = 64 << 20
    return c


def response(**adjust: object) -> api.CreateContainerResponse:
    return api.CreateContainerResponse(adjust=api.ContainerAdjustment(**adjust))  # type: ignore[arg-type]


def merged(*plugin_responses: tuple[str, api.CreateContainerResponse]) -> tuple[
        CreateResult, api.Container]:
    original = container()
    result = CreateResult(container())
    for plugin, rsp in plugin_responses:
        result.apply(plugin, rsp)
    return result, apply_adjustment(original, result.response().adjust)


def test_env_add_and_override_reach_the_container() -> None:
    _, effective = merged(("10-a", response(env=[api.KeyValue(key="NEW", value="1"),
                                                 api.KeyValue(key="PATH", value="/usr/bin")])))
    assert list(effective.env) == ["PATH=/usr/bin", "HTTP_PROXY=http://proxy", "NEW=1"]


def test_env_removal_hides_from_later_plugins_but_is_not_forwarded() -> None:
    result, effective = merged(("10-a", response(env=[api.KeyValue(key="-HTTP_PROXY")])))
    assert "HTTP_PROXY=http://proxy" not in result.container.env  # later plugins' view
    assert list(result.adjust.env) == []  # not forwarded to the runtime
    assert "HTTP_PROXY=http://proxy" in effective.env  # a pre-existing variable survives


def test_env_removal_undoes_an_earlier_plugins_addition() -> None:
    result, effective = merged(
        ("10-a", response(env=[api.KeyValue(key="FOO", value="a")])),
        ("20-b", response(env=[api.KeyValue(key="-FOO"), api.KeyValue(key="FOO", value="b")])))
    assert [(kv.key, kv.value) for kv in result.adjust.env] == [("FOO", "b")]
    assert "FOO=b" in effective.env and "FOO=a" not in effective.env


def test_same_env_twice_in_one_response_is_a_conflict() -> None:
    with pytest.raises(MergeError, match=r'plugins "10-a" and "10-a" both tried to set Env X'):
        merged(("10-a", response(env=[api.KeyValue(key="X", value="1"),
                                      api.KeyValue(key="X", value="2")])))


def test_two_plugins_claiming_one_resource_conflict() -> None:
    a = api.CreateContainerResponse()
    a.adjust.linux.resources.cpu.shares.value = 512
    b = api.CreateContainerResponse()
    b.adjust.linux.resources.cpu.shares.value = 1024
    with pytest.raises(MergeError, match=r'"10-a" and "20-b" both tried to set CPUShares'):
        merged(("10-a", a), ("20-b", b))


def test_annotation_removal_and_replace() -> None:
    result, effective = merged(
        ("10-a", response(annotations={"new": "x", "-drop": ""})),
        ("20-b", response(annotations={"-new": "", "new": "y"})))
    assert dict(effective.annotations) == {"keep": "1", "new": "y"}
    assert result.owners.owner("c1", api.Field.Value("Annotations"), "new") == "20-b"


def test_annotation_claimed_twice_by_plugins_conflicts() -> None:
    with pytest.raises(MergeError, match="Annotations k"):
        merged(("10-a", response(annotations={"k": "1"})),
               ("20-b", response(annotations={"k": "2"})))


def test_mount_removal_is_forwarded_and_duplicates_conflict() -> None:
    result, effective = merged(("10-a", response(mounts=[api.Mount(destination="-/data")])))
    assert [m.destination for m in result.adjust.mounts] == ["-/data"]
    assert [m.destination for m in effective.mounts] == ["/proc"]
    with pytest.raises(MergeError, match="Mounts /x"):
        merged(("10-a", response(mounts=[api.Mount(destination="/x"),
                                         api.Mount(destination="/x")])))


def test_mount_override_of_another_plugin() -> None:
    result, effective = merged(
        ("10-a", response(mounts=[api.Mount(destination="/x", source="/a")])),
        ("20-b", response(mounts=[api.Mount(destination="-/x"),
                                  api.Mount(destination="/x", source="/b")])))
    assert [(m.destination, m.source) for m in result.adjust.mounts] == [("/x", "/b")]
    assert [m.source for m in effective.mounts if m.destination == "/x"] == ["/b"]


def test_device_removal_not_forwarded() -> None:
    rsp = api.CreateContainerResponse()
    rsp.adjust.linux.devices.add(path="-/dev/fuse")
    rsp.adjust.linux.devices.add(path="/dev/kvm", type="c", major=10, minor=232)
    result, effective = merged(("10-a", rsp))
    assert [d.path for d in result.adjust.linux.devices] == ["/dev/kvm"]
    assert [d.path for d in effective.linux.devices] == ["/dev/fuse", "/dev/kvm"]


def test_resources_and_singletons_applied() -> None:
    rsp = api.CreateContainerResponse()
    res = rsp.adjust.linux.resources
    res.cpu.shares.value = 1024
    res.cpu.quota.value = 200000
    res.cpu.period.value = 100000
    res.cpu.cpus = "2-3"
    res.cpu.mems = "0"
    res.memory.limit.value = 4 << 30
    res.unified["memory.high"] = "max"
    res.blockio_class.value = "slow"
    res.rdt_class.value = "gold"
    res.pids.limit = 100
    rsp.adjust.linux.oom_score_adj.value = -997
    rsp.adjust.linux.cgroups_path = "/kubepods/x"
    rsp.adjust.rlimits.add(type="RLIMIT_NOFILE", hard=1024, soft=512)
    rsp.adjust.CDI_devices.add(name="vendor.com/gpu=0")
    rsp.adjust.hooks.prestart.add(path="/bin/hook")
    rsp.adjust.linux.sysctl["net.core.somaxconn"] = "1024"
    _, effective = merged(("10-a", rsp))
    out = effective.linux.resources
    assert (out.cpu.shares.value, out.cpu.quota.value, out.cpu.period.value) == (1024, 200000,
                                                                                  100000)
    assert (out.cpu.cpus, out.cpu.mems, out.memory.limit.value) == ("2-3", "0", 4 << 30)
    assert dict(out.unified) == {"memory.high": "max"}
    assert (out.blockio_class.value, out.rdt_class.value, out.pids.limit) == ("slow", "gold", 100)
    assert effective.linux.oom_score_adj.value == -997
    assert effective.linux.cgroups_path == "/kubepods/x"
    assert [(r.type, r.soft) for r in effective.rlimits] == [("RLIMIT_NOFILE", 512)]
    assert [d.name for d in effective.CDI_devices] == ["vendor.com/gpu=0"]
    assert [h.path for h in effective.hooks.prestart] == ["/bin/hook"]
    assert dict(effective.linux.sysctl) == {"net.core.somaxconn": "1024"}


def test_hooks_accumulate_owners_and_cdi_duplicates_conflict() -> None:
    a, b = api.CreateContainerResponse(), api.CreateContainerResponse()
    a.adjust.hooks.poststart.add(path="/a")
    b.adjust.hooks.poststart.add(path="/b")
    result, effective = merged(("10-a", a), ("20-b", b))
    assert [h.path for h in effective.hooks.poststart] == ["/a", "/b"]
    assert result.owners.owner("c1", api.Field.Value("OciHooks")) == "10-a,20-b"
    with pytest.raises(MergeError, match="CdiDevices"):
        merged(("10-a", response(CDI_devices=[api.CDIDevice(name="g")])),
               ("20-b", response(CDI_devices=[api.CDIDevice(name="g")])))


def test_namespace_removal_and_args_override() -> None:
    rsp = api.CreateContainerResponse()
    rsp.adjust.linux.namespaces.add(type="-network")
    _, effective = merged(("10-a", response(args=["/bin/a"])),
                               ("20-b", response(args=["", "/bin/b"])), ("30-c", rsp))
    assert list(effective.args) == ["/bin/b"]
    assert [ns.type for ns in effective.linux.namespaces] == []
    with pytest.raises(MergeError, match="Args"):
        merged(("10-a", response(args=["/bin/a"])), ("20-b", response(args=["/bin/b"])))


def test_update_of_the_container_being_created_is_an_error() -> None:
    rsp = api.CreateContainerResponse(update=[api.ContainerUpdate(container_id="c1")])
    with pytest.raises(MergeError, match="during creation"):
        merged(("10-a", rsp))


def test_updates_merge_per_container_with_pending_last() -> None:
    pending = api.ContainerUpdate(container_id="c1")
    pending.linux.resources.cpu.shares.value = 100
    pending.linux.resources.memory.limit.value = 1 << 30
    result = UpdateResult(Ownership(), pending=pending)
    mine = api.ContainerUpdate(container_id="c1")
    mine.linux.resources.cpu.shares.value = 200
    other = api.ContainerUpdate(container_id="c2", ignore_failure=True)
    other.linux.resources.cpu.quota.value = 5000
    result.add("10-a", [mine, other])
    out = result.result()
    assert [u.container_id for u in out] == ["c2", "c1"]  # the effective one is last
    assert out[-1].linux.resources.cpu.shares.value == 200
    assert out[-1].linux.resources.memory.limit.value == 1 << 30
    assert out[0].ignore_failure is True


def test_conflicting_update_with_ignore_failure_is_dropped() -> None:
    result = UpdateResult(Ownership())
    a = api.ContainerUpdate(container_id="c2", ignore_failure=True)
    a.linux.resources.cpu.shares.value = 1
    b = api.ContainerUpdate(container_id="c2", ignore_failure=True)
    b.linux.resources.cpu.shares.value = 2
    result.add("10-a", [a])
    result.add("20-b", [b])  # conflict swallowed: 20-b's change is dropped
    assert result.result()[0].linux.resources.cpu.shares.value == 1
    b.ignore_failure = False
    with pytest.raises(MergeError):
        result.add("20-b", [b])


def test_sync_splitter_shrinks_until_chunks_fit() -> None:
    containers = [api.Container(id=f"c{i}", annotations={"pad": "x" * 1000}) for i in range(100)]
    splitter = SyncSplitter([], containers)
    sizes, chunks = [], []
    limit = 20_000
    while True:
        request = splitter.request()
        size = request.ByteSize()
        if size > limit:
            splitter.rejected(size, limit)
            continue
        sizes.append(size)
        chunks.append(request)
        if splitter.accepted():
            break
    assert splitter.shrinks >= 1 and len(chunks) > 1
    assert all(size <= limit for size in sizes)
    assert [c.more for c in chunks] == [True] * (len(chunks) - 1) + [False]
    assert sum(len(c.containers) for c in chunks) == 100


def test_sync_splitter_gives_up_below_eight_objects() -> None:
    splitter = SyncSplitter([], [api.Container(id=f"c{i}") for i in range(8)])
    with pytest.raises(SyncTooLarge):
        splitter.rejected(10, 5)
