"""The one systemd slice grammar (bridge.contract.systemd_slice): names built by `try`
(bridge.kube) are the names the policy server expands into cgroup directories, recognises as
systemd units and walks up to the kube-QoS level; mutated names are refused everywhere."""

from __future__ import annotations

from fractions import Fraction
from pathlib import PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.contract import systemd_slice
from bridge.contract.systemd_slice import SliceNameError
from bridge.kube.node import NodeSpec
from bridge.kube.pod_spec import ContainerKind, ContainerSpec, PodSpec
from bridge.kube.resources import cgroup_parent
from policy_server import sdk
from policy_server.node.cgroup_layout import cgroup_dir, container_dir
from policy_server.node.unit_properties import unit_name
from policy_server.policies.koordinator_qos.qos_node_plan import kube_qos_dir

POD = "kubepods-burstable-pod1_2.slice"
POD_DIR = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice"
# One mutation each of a good name: an empty part, a leading or trailing '-', a path, the root
# slice, a wrong suffix, no name at all.
MUTATED = ["kubepods--pod1.slice", "-kubepods.slice", "kubepods-.slice", "kubepods/pod1.slice",
           "-.slice", ".slice", "kubepods-pod1.slic", "kubepods-pod1", "kubepods-pod1.scope", ""]
parts_st = st.lists(
    st.text(st.characters(codec="ascii", categories=["L", "N"], include_characters="_-."),
            min_size=1, max_size=8),
    min_size=1, max_size=5,
)


def test_a_name_and_its_directories() -> None:
    assert systemd_slice.slice_name(["kubepods", "burstable", "pod1-2"]) == POD
    assert systemd_slice.slice_parts(POD) == ("kubepods", "burstable", "pod1_2")
    assert systemd_slice.slice_path(POD) == POD_DIR
    assert systemd_slice.parent_slice(POD) == "kubepods-burstable.slice"
    assert systemd_slice.parent_slice("kubepods.slice") is None
    assert systemd_slice.is_slice_path(POD_DIR.split("/"))
    assert systemd_slice.scope_of(f"{POD}:cri-containerd:abc") == (
        POD, "cri-containerd-abc.scope")
    assert systemd_slice.scope_of("/kubepods/pod1/abc") is None


@pytest.mark.parametrize("name", MUTATED)
def test_mutated_names_are_refused_everywhere(name: str) -> None:
    with pytest.raises(SliceNameError):
        systemd_slice.slice_path(name)
    with pytest.raises(SliceNameError):
        systemd_slice.parent_slice(name)
    if systemd_slice.is_slice_name(name):  # written as a slice: never read as a path
        with pytest.raises(ValueError):
            cgroup_dir(name)
        assert kube_qos_dir(name) is None
    assert not systemd_slice.is_slice_path([name])


@pytest.mark.parametrize(
    "names",
    [["kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort-pod1.slice"],  # a
     ["kubepods-burstable.slice"],  # the top is missing
     ["kubepods.slice", "kubepods-burstable-pod1.slice"],  # a level skipped
     ["kubepods-burstable.slice", "kubepods.slice"],  # upside down
     ["kubepods.slice", "kubepods-burstable"],  # no suffix
     []],
)  # fmt: skip
def test_mutated_slice_paths_are_no_units(names: list[str]) -> None:
    assert not systemd_slice.is_slice_path(names)
    if names:
        assert unit_name(PurePosixPath(*names)) is None


@pytest.mark.parametrize(
    "path", [f"{POD}::abc", f"{POD}:cri-containerd:", "a:b:c/d"])
def test_mutated_cgroups_paths(path: str) -> None:
    if "/" in path:
        assert systemd_slice.scope_of(path) is None  # a cgroupfs path, read as one
    else:
        with pytest.raises(SliceNameError):
            systemd_slice.scope_of(path)
        with pytest.raises(ValueError):
            container_dir(path)


def test_what_try_builds_the_policy_server_reads() -> None:
    burstable = ContainerSpec("c", "i", ContainerKind.REGULAR, requests=(("cpu", Fraction(1)),))
    pod = PodSpec("test", "p", "default", "1234-abcd", (), (), (burstable,))
    parent = cgroup_parent(pod, NodeSpec(cgroup_driver="systemd"))
    assert parent == ("/kubepods.slice/kubepods-burstable.slice/"
                      "kubepods-burstable-pod1234_abcd.slice")
    name = parent.rsplit("/", 1)[1]
    assert str(cgroup_dir(name)) == parent.lstrip("/") == str(cgroup_dir(parent))
    assert unit_name(cgroup_dir(name)) == name
    assert kube_qos_dir(name) == sdk.systemd_parent_slice(name) == "kubepods-burstable.slice"


@given(parts_st)
def test_round_trip(parts: list[str]) -> None:
    name = systemd_slice.slice_name(parts)
    escaped = tuple(p.replace("-", "_") for p in parts)
    assert systemd_slice.slice_parts(name) == escaped
    directories = systemd_slice.slice_path(name).split("/")
    assert len(directories) == len(parts) and directories[-1] == name
    assert systemd_slice.is_slice_path(directories)
    parent = systemd_slice.parent_slice(name)
    assert parent == (directories[-2] if len(parts) > 1 else None)


@given(parts_st, st.integers(min_value=0), st.sampled_from(["--", "-", "/", ""]))
def test_an_inserted_separator_or_a_dropped_part_breaks_the_chain(
    parts: list[str], where: int, inserted: str
) -> None:
    directories = systemd_slice.slice_path(systemd_slice.slice_name(parts)).split("/")
    i = where % len(directories)
    stem = directories[i].removesuffix(".slice")
    mutated = [*directories]
    mutated[i] = stem + inserted + ".slice" if inserted else stem
    if inserted == "-":
        mutated[i] = stem + "-x.slice"  # a level added in one place only
    assert not systemd_slice.is_slice_path(mutated)
