"""The side-effect executor against temporary trees shaped like /sys/fs/cgroup (v1 and v2)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from policy_server.node.cgroup_layout import CgroupVersion, cgroup_dir, container_dir
from policy_server.node.container_files import ContainerFiles
from policy_server.node.cpu_weight import CpuWeights, WeightFormula, WeightSetting
from policy_server.node.execution import ExecutorMode
from policy_server.node.executor import NodeExecutor
from policy_server.sdk.effects import CgroupWrite, HostDirectory

V1_PARENT = "/kubepods/besteffort/pod1"
V2_PARENT = "kubepods-besteffort-pod1.slice"
V2_DIR = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice"
WRITES = [
    CgroupWrite(V1_PARENT, "cpu.shares", 1024, "default/be"),
    CgroupWrite(V1_PARENT, "cpu.cfs_quota_us", -1, "default/be"),
    CgroupWrite(V1_PARENT, "memory.limit_in_bytes", 2147483648, "default/be"),
    CgroupWrite(V1_PARENT, "cpu.bvt_warp_ns", -1, "default/be"),
]


def v1_tree(root: Path) -> Path:
    for controller, files in {
        "cpu": ["cpu.shares", "cpu.cfs_quota_us", "cpu.bvt_warp_ns"],
        "memory": ["memory.limit_in_bytes"],
    }.items():
        pod = root / controller / V1_PARENT.lstrip("/")
        pod.mkdir(parents=True)
        for name in files:
            (pod / name).write_text("original\n")
    return root


def v2_tree(root: Path) -> Path:
    (root / "cgroup.controllers").write_text("cpu memory\n")
    pod = root / V2_DIR
    pod.mkdir(parents=True)
    for name in ("cpu.weight", "cpu.max", "memory.max", "cpu.bvt_warp_ns"):
        (pod / name).write_text("original\n")
    return root


def test_v1_writes(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    executor = NodeExecutor(ExecutorMode.ON, root)
    assert executor.version is CgroupVersion.V1
    report = executor.apply(WRITES)
    assert len(report.written) == 4 and not report.failed
    cpu = root / "cpu/kubepods/besteffort/pod1"
    assert (cpu / "cpu.shares").read_text() == "1024"
    assert (cpu / "cpu.cfs_quota_us").read_text() == "-1"
    assert (cpu / "cpu.bvt_warp_ns").read_text() == "-1"
    assert (root / "memory/kubepods/besteffort/pod1/memory.limit_in_bytes").read_text() == (
        "2147483648")


def test_v2_writes_convert_names_and_values(tmp_path: Path) -> None:
    root = v2_tree(tmp_path)
    executor = NodeExecutor(ExecutorMode.ON, root)
    assert executor.version is CgroupVersion.V2
    writes = [CgroupWrite(V2_PARENT, w.file, w.value) for w in WRITES]
    writes.append(CgroupWrite(V2_PARENT, "cpu.cfs_quota_us", 50000))
    report = executor.apply(writes)
    assert not report.failed
    pod = root / V2_DIR
    assert (pod / "cpu.weight").read_text() == "39"  # 1 + (1024-2)*9999/262142
    assert (pod / "cpu.max").read_text() == "50000"  # last write wins; period untouched
    assert (pod / "memory.max").read_text() == "2147483648"
    assert (pod / "cpu.bvt_warp_ns").read_text() == "-1"
    executor.apply([CgroupWrite(V2_PARENT, "cpu.cfs_quota_us", -1),
                    CgroupWrite(V2_PARENT, "memory.limit_in_bytes", -1)])
    assert (pod / "cpu.max").read_text() == "max"
    assert (pod / "memory.max").read_text() == "max"


def test_v2_pod_weights_follow_the_runtimes_formula(tmp_path: Path) -> None:
    root = v2_tree(tmp_path)
    weight = root / V2_DIR / "cpu.weight"
    shares = CgroupWrite(V2_PARENT, "cpu.shares", 1024)
    told = NodeExecutor(ExecutorMode.ON, root, weights=CpuWeights(WeightSetting.QUADRATIC))
    told.apply([shares])
    assert weight.read_text() == "100"  # runc >= 1.3.2 gives shares 1024 the default weight
    assert told.writer.drifted(shares) is False
    auto = NodeExecutor(ExecutorMode.ON, root)
    assert auto.writer.drifted(shares) is None  # not known which weight is right: not judged
    assert auto.weights.learn([(512, 20)]) is WeightFormula.LINEAR
    assert auto.writer.drifted(shares) is True  # linear wants 39


def test_dry_run_only_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = v1_tree(tmp_path)
    with caplog.at_level(logging.INFO):
        report = NodeExecutor(ExecutorMode.DRY_RUN, root).apply(WRITES)
    assert len(report.logged) == 4 and not report.written
    assert (root / "cpu/kubepods/besteffort/pod1/cpu.shares").read_text() == "original\n"
    assert "dry-run: would write" in caplog.text and "cpu.shares <- 1024" in caplog.text


def test_off_does_nothing(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    report = NodeExecutor(ExecutorMode.OFF, root).apply(WRITES)
    assert report.written == report.logged == report.failed == []
    assert (root / "cpu/kubepods/besteffort/pod1/cpu.shares").read_text() == "original\n"


def test_missing_pod_cgroup_is_skipped_not_created(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    report = NodeExecutor(ExecutorMode.ON, root).apply(
        [CgroupWrite("/kubepods/besteffort/gone", "cpu.shares", 2)])
    assert len(report.skipped) == 1 and not report.written
    assert not (root / "cpu/kubepods/besteffort/gone").exists()


def test_kernel_without_bvt_is_skipped_quietly(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    (root / "cpu/kubepods/besteffort/pod1/cpu.bvt_warp_ns").unlink()  # kernel without bvt
    report = NodeExecutor(ExecutorMode.ON, root).apply(
        [CgroupWrite(V1_PARENT, "cpu.bvt_warp_ns", 2)])
    assert not report.failed and "kernel has no cpu.bvt_warp_ns" in report.skipped[0]


def test_a_file_the_kernel_lacks_is_looked_for_once_per_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Synchronize writes cpu.bvt_warp_ns into every pod; a stock kernel has it in none.
    root = tmp_path
    parents = [f"/kubepods/besteffort/pod{i}" for i in range(5)]
    for parent in parents:
        pod = root / "cpu" / parent.lstrip("/")
        pod.mkdir(parents=True)
        (pod / "cpu.shares").write_text("2\n")
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: str, flags: int, *args: int, **kwargs: int) -> int:
        opened.append(os.path.basename(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    effects = [
        write
        for parent in parents
        for write in (
            CgroupWrite(parent, "cpu.bvt_warp_ns", 2),
            CgroupWrite(parent, "cpu.shares", 3),
        )
    ]
    executor = NodeExecutor(ExecutorMode.ON, root, CgroupVersion.V1)
    for _ in range(2):  # each call looks once (a kernel's files are not cached across calls)
        opened.clear()
        report = executor.apply(effects)
        assert opened.count("cpu.bvt_warp_ns") == 1
        assert opened.count("cpu.shares") == 5
        assert [line.rsplit(": ", 1)[1] for line in report.skipped] == [
            "kernel has no cpu.bvt_warp_ns"
        ] * 5
        assert len(report.written) == 5 and not report.failed
    assert all((root / "cpu" / p.lstrip("/") / "cpu.shares").read_text() == "3" for p in parents)


def test_missing_file_fails_without_raising(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    (root / "cpu/kubepods/besteffort/pod1/cpu.shares").unlink()  # controller not there
    report = NodeExecutor(ExecutorMode.ON, root).apply(
        [CgroupWrite(V1_PARENT, "cpu.shares", 2)])
    assert len(report.failed) == 1 and "No such file" in report.failed[0]


@pytest.mark.parametrize(
    "parent", ["/kubepods/../../etc", "", "kubepods--x.slice", "/", ".", "/./", "a/..", "  "]
)
def test_bad_parents_are_refused(tmp_path: Path, parent: str) -> None:
    report = NodeExecutor(ExecutorMode.ON, v1_tree(tmp_path)).apply(
        [CgroupWrite(parent, "cpu.shares", 2)])
    assert len(report.failed) == 1


def test_unknown_file_is_refused(tmp_path: Path) -> None:
    report = NodeExecutor(ExecutorMode.ON, v1_tree(tmp_path)).apply(
        [CgroupWrite(V1_PARENT, "cgroup.procs", 1)])
    assert "unsupported cgroup file" in report.failed[0]


@pytest.mark.parametrize(
    ("parent", "relative"),
    [
        ("/kubepods/burstable/pod1", "kubepods/burstable/pod1"),
        ("kubepods-pod1.slice", "kubepods.slice/kubepods-pod1.slice"),
        (V2_PARENT, V2_DIR),
        ("/kubepods.slice/kubepods-pod1.slice", "kubepods.slice/kubepods-pod1.slice"),
        # Read as a path reads it: empty and "." components dropped.
        ("//kubepods/./burstable//pod1/", "kubepods/burstable/pod1"),
        (" /kubepods/pod1 ", "kubepods/pod1"),
    ],
)
def test_cgroup_dir_for_both_drivers(parent: str, relative: str) -> None:
    assert str(cgroup_dir(parent)) == relative


def test_host_directory(tmp_path: Path) -> None:
    target = tmp_path / "vgpu/containers/uid_app"
    report = NodeExecutor(ExecutorMode.ON, tmp_path).apply(
        [HostDirectory(str(target), 0o777)])
    assert target.is_dir() and (target.stat().st_mode & 0o777) == 0o777
    assert report.written == [f"mkdir {target} mode 777"]
    dry = NodeExecutor(ExecutorMode.DRY_RUN, tmp_path).apply(
        [HostDirectory(str(tmp_path / "other"), 0o777)])
    assert dry.logged and not (tmp_path / "other").exists()


def test_host_directory_is_emptied_first_when_asked(tmp_path: Path) -> None:
    # koordinator-qos's gpu hook asks for it (koordlet: os.RemoveAll then MkdirAll(0777)): a
    # restarted container never sees the previous one's cache file.
    target = tmp_path / "vgpu/containers/uid_app"
    target.mkdir(parents=True)
    (target / "uid_app.cache").write_text("stale")
    executor = NodeExecutor(ExecutorMode.ON, tmp_path)
    executor.apply([HostDirectory(str(target), 0o777)])
    assert [p.name for p in target.iterdir()] == ["uid_app.cache"]  # kept unless asked
    executor.apply([HostDirectory(str(target), 0o777, emptied=True)])
    assert target.is_dir() and list(target.iterdir()) == []


def test_unwritable_cgroups_skip_writes_quietly(tmp_path: Path) -> None:
    executor = NodeExecutor(ExecutorMode.ON, tmp_path / "missing")
    probe = executor.probe()
    assert not probe.writable and "no cgroup hierarchy" in probe.reason
    report = executor.apply(WRITES)
    assert not report.failed and not report.written and len(report.skipped) == len(WRITES)


def test_read_back_and_drift(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    executor = NodeExecutor(ExecutorMode.ON, root)
    (root / "memory" / V1_PARENT.lstrip("/") / "memory.limit_in_bytes").write_text(
        "9223372036854771712\n")
    assert executor.writer.read(CgroupWrite(V1_PARENT, "memory.limit_in_bytes", -1)) == "-1"
    assert executor.writer.drifted(CgroupWrite(V1_PARENT, "memory.limit_in_bytes", -1)) is False
    assert executor.writer.drifted(CgroupWrite(V1_PARENT, "cpu.shares", 2)) is True  # "original"
    assert executor.writer.drifted(CgroupWrite("/kubepods/gone", "cpu.shares", 2)) is None


def test_container_dirs_for_both_drivers() -> None:
    assert str(container_dir("/kubepods/burstable/pod1/abc")) == "kubepods/burstable/pod1/abc"
    assert str(container_dir("kubepods-burstable-pod1.slice:cri-containerd:abc")) == (
        "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/"
        "cri-containerd-abc.scope")
    with pytest.raises(ValueError):
        container_dir("kubepods-pod1.slice::abc")


def test_container_values_v1_and_v2(tmp_path: Path) -> None:
    v1 = tmp_path / "v1"
    for controller, name, value in (("cpu", "cpu.shares", "512"),
                                    ("cpu", "cpu.cfs_quota_us", "-1"),
                                    ("cpuset", "cpuset.cpus", "0-3"),
                                    ("memory", "memory.limit_in_bytes", "9223372036854771712"),
                                    ("cpu", "cgroup.procs", "7\n8")):
        (v1 / controller / "kubepods/pod1/c1").mkdir(parents=True, exist_ok=True)
        (v1 / controller / "kubepods/pod1/c1" / name).write_text(value + "\n")
    files = ContainerFiles(v1, CgroupVersion.V1)
    assert files.values("/kubepods/pod1/c1") == {
        "shares": 512, "quota": -1, "memory": -1, "cpus": "0-3"}
    assert files.pids("/kubepods/pod1/c1") == [7, 8] and files.pids("/gone") == []
    v2 = tmp_path / "v2" / "kubepods" / "pod1" / "c1"
    v2.mkdir(parents=True)
    for name, value in (("cpu.weight", "20"), ("cpu.max", "50000 100000"),
                        ("memory.max", "max"), ("cpuset.cpus", "1")):
        (v2 / name).write_text(value + "\n")
    files = ContainerFiles(tmp_path / "v2", CgroupVersion.V2)
    assert files.values("/kubepods/pod1/c1") == {
        "weight": 20, "quota": 50000, "memory": -1, "cpus": "1"}
