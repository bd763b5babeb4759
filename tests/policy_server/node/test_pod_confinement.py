"""The pod hierarchy check and the no-symlink walk (policy_server/node/pod_confinement.py),
each shown refusing a mutated input."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from policy_server.node.cgroup_layout import cgroup_dir_text, container_dir
from policy_server.node.pod_confinement import (
    ConfinementError,
    PodHierarchy,
    is_dir_beneath,
    open_beneath,
    read_beneath,
    write_beneath,
)

PODS = PodHierarchy()
UID = "1234-abcd"


@pytest.mark.parametrize(
    "parent",
    [
        "/kubepods",
        "/kubepods/burstable",
        "/kubepods/besteffort/pod1234-abcd",
        "/kubepods/pod1234-abcd",
        "kubepods.slice",
        "kubepods-besteffort.slice",
        "kubepods-besteffort-pod1234_abcd.slice",
        "kubepods-pod1234_abcd.slice",
    ],
)
def test_kubelets_layouts_are_inside(parent: str) -> None:
    assert PODS.confined(cgroup_dir_text(parent))


@pytest.mark.parametrize(
    ("rel", "why"),
    [
        ("system.slice/kubelet.service", "outside the pod hierarchy"),
        ("kubepods-evil/pod1", "outside the pod hierarchy"),  # kubepods replaced
        ("kubepodsx/pod1", "outside the pod hierarchy"),
        ("kubepods/../system.slice/kubelet.service", "component '..'"),
        ("kubepods/./pod1", "component '.'"),
        ("kubepods//pod1", "component ''"),
        ("kubepods/pod1\x00", "control character"),
        ("kubepods/pod\n1", "control character"),
        ("user.slice/kubepods/pod1", "outside the pod hierarchy"),
        ("kubepods.slice/system.slice", "outside the pod hierarchy"),
        ("kubepods.slice/kubepods-x.slice/evil.slice", "outside the pod hierarchy"),
        ("", "outside the pod hierarchy"),
    ],
)
def test_anything_else_is_refused_with_the_path(rel: str, why: str) -> None:
    with pytest.raises(ConfinementError, match=why):
        PODS.confined(rel)


def test_a_kubelet_cgroup_root_moves_the_hierarchy() -> None:
    pods = PodHierarchy.of("/nri-e2e-r1")
    assert pods.confined("nri-e2e-r1/kubepods/pod1") == ("nri-e2e-r1", "kubepods", "pod1")
    for rel in ("kubepods/pod1", "nri-e2e-r2/kubepods/pod1", "nri-e2e-r1/pod1"):
        with pytest.raises(ConfinementError, match="outside"):
            pods.confined(rel)
    with pytest.raises(ConfinementError, match="absolute"):
        PodHierarchy.of("nri-e2e-r1")
    with pytest.raises(ConfinementError, match=r"'\.\.'"):
        PodHierarchy.of("/a/../b")


def test_a_container_is_below_its_own_pods_cgroup() -> None:
    cgroupfs = str(container_dir(f"/kubepods/besteffort/pod{UID}/c1"))
    systemd = str(container_dir(f"kubepods-besteffort-pod{UID.replace('-', '_')}.slice:cri:c1"))
    assert PODS.container(cgroupfs, UID) and PODS.container(systemd, UID)
    with pytest.raises(ConfinementError, match="not below pod other"):
        PODS.container(cgroupfs, "other")
    for shallow in ("kubepods", "kubepods/besteffort", "kubepods.slice/x.scope"):
        with pytest.raises(ConfinementError, match=r"not a container's cgroup|outside"):
            PODS.container(shallow)


def tree(base: Path) -> Path:
    (base / "kubepods" / "pod1").mkdir(parents=True)
    (base / "kubepods" / "pod1" / "memory.max").write_text("max\n")
    (base / "kubelet").mkdir()
    (base / "kubelet" / "memory.max").write_text("max\n")
    return base


def test_writes_and_reads_go_through_real_directories(tmp_path: Path) -> None:
    base = str(tree(tmp_path))
    write_beneath(base, ("kubepods", "pod1"), "memory.max", "4096")
    assert read_beneath(base, ("kubepods", "pod1"), "memory.max") == "4096"
    assert is_dir_beneath(base, ("kubepods", "pod1"))


def test_a_symlinked_directory_is_not_followed(tmp_path: Path) -> None:
    base = tree(tmp_path)
    (base / "kubepods" / "pod2").symlink_to(base / "kubelet")
    with pytest.raises(OSError) as caught:
        write_beneath(str(base), ("kubepods", "pod2"), "memory.max", "4096")
    assert caught.value.errno in (errno.ELOOP, errno.ENOTDIR)
    assert read_beneath(str(base), ("kubepods", "pod2"), "memory.max") is None
    assert not is_dir_beneath(str(base), ("kubepods", "pod2"))
    assert (base / "kubelet" / "memory.max").read_text() == "max\n"


def test_a_symlinked_file_is_not_followed(tmp_path: Path) -> None:
    base = tree(tmp_path)
    (base / "kubepods" / "pod1" / "cpu.weight").symlink_to(base / "kubelet" / "memory.max")
    with pytest.raises(OSError) as caught:
        write_beneath(str(base), ("kubepods", "pod1"), "cpu.weight", "1")
    assert caught.value.errno == errno.ELOOP
    assert (base / "kubelet" / "memory.max").read_text() == "max\n"


def test_the_base_may_be_a_symlink(tmp_path: Path) -> None:
    # cgroup v1: /sys/fs/cgroup/cpu -> cpu,cpuacct is the node's layout, not an attack.
    tree(tmp_path / "cpu,cpuacct")
    (tmp_path / "cpu").symlink_to(tmp_path / "cpu,cpuacct")
    assert read_beneath(str(tmp_path / "cpu"), ("kubepods", "pod1"), "memory.max") == "max"


def test_a_file_name_is_one_component(tmp_path: Path) -> None:
    base = str(tree(tmp_path))
    for name in ("../kubelet/memory.max", "..", ""):
        with pytest.raises(ConfinementError):
            fd = open_beneath(base, ("kubepods",), name, os.O_RDONLY)
            os.close(fd)
