"""Resctrl (docs/koordinator.md#resctrl): schemata arithmetic, the group lifecycle on a fake resctrl
tree, and
``rdt_class`` handed out only for a group that exists.

This VM has no RDT hardware, so the tree is a directory laid out like ``/sys/fs/resctrl``
(``schemata``, ``info/L3/cbm_mask``); a real resctrl group is removed by ``rmdir`` and a plain
directory by the fallback the module documents.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policy_server.node.resctrl_fs import ResctrlFS
from policy_server.node.resctrl_masks import (
    AMD_VENDOR_ID,
    INTEL_VENDOR_ID,
    l3_mask,
    mba_value,
    schemata_lines,
)
from policy_server.policies.koordinator_qos.annotations import AnnotationError
from policy_server.policies.koordinator_qos.resctrl_schemata import resctrl_group
from policy_server.sdk.effects import ResctrlGroup
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.factory import container, envelope, pod, request

RESCTRL = "node.koordinator.sh/resctrl"


@pytest.mark.parametrize(
    ("cbm", "start", "end", "mask"),
    [  # koordinator Test_calculateCatL3Schemata ("calculate l3 schemata correctly" 0-4)
        (0xFF, 0, 100, 0xFF),
        (0x3FF, 10, 80, 0xFE),
        (0x7FF, 10, 50, 0x3C),
        (0x3FF, 0, 30, 0x7),
        (0x3FF, 10, 85, 0x1FE),
    ],
)
def test_l3_mask(cbm: int, start: int, end: int, mask: int) -> None:
    assert l3_mask(cbm, start, end) == mask


@pytest.mark.parametrize(
    ("cbm", "start", "end"),
    [(0x101, 0, 100), (4, 0, 100), (0xFF, -10, 100), (0xFF, 30, 30), (0, 0, 100)],
)
def test_l3_mask_refuses_what_koordlet_refuses(cbm: int, start: int, end: int) -> None:
    # Test_calculateCatL3Schemata: "cbm value is invalid" (0x101, 4), "percent value is invalid".
    with pytest.raises(ValueError, match="illegal"):
        l3_mask(cbm, start, end)


@pytest.mark.parametrize(
    ("percent", "vendor", "value"),
    [  # koordinator Test_calculateMbaPercentForGroup
        (85, INTEL_VENDOR_ID, 90),
        (80, INTEL_VENDOR_ID, 80),
        (80, AMD_VENDOR_ID, 128),  # int(0.8 * AMDCCDMaxMBGbps)
        (100, AMD_VENDOR_ID, 2048),  # AMDCCDUnlimitedMB
        (50, "HygonGenuine", 0),
    ],
)
def test_mba_value(percent: int, vendor: str, value: int) -> None:
    assert mba_value(percent, vendor) == value


def test_schemata_lines_whole_range_then_per_cache() -> None:
    group = ResctrlGroup("koordlet-u", l3=((None, 0, 30), (1, 0, 100)), mb=((None, 85),))
    assert schemata_lines(group, 0x7FF, (0, 1), INTEL_VENDOR_ID) == (
        "L3:0=f;1=7ff",
        "MB:0=90;1=90",
    )
    # Only what the pod asked for: no MB line without an MB request.
    only_l3 = ResctrlGroup("koordlet-u", l3=((None, 10, 50),))
    assert schemata_lines(only_l3, 0x7FF, (0,), INTEL_VENDOR_ID) == ("L3:0=3c",)


def test_annotation_to_group() -> None:
    config = {
        "llc": {"schemata": {"range": [0, 30]},
                "schemataPerCache": [{"cacheID": 1, "range": [20, 100]}]},
        "mb": {"schemata": {"percent": 50}, "schemataPerCache": [{"cacheID": 0, "percent": 20}]},
    }  # fmt: skip
    group = resctrl_group(config, "u1", "default/p")
    assert group == ResctrlGroup(
        "koordlet-u1", l3=((None, 0, 30), (1, 20, 100)), mb=((None, 50), (0, 20)), pod="default/p"
    )
    with pytest.raises(AnnotationError, match=r"llc\.schemata: expected an object"):
        resctrl_group({"llc": {"schemata": 3}}, "u1", "default/p")


def fake_resctrl(root: Path, vendor: str = INTEL_VENDOR_ID) -> ResctrlFS:
    (root / "info" / "L3").mkdir(parents=True)
    (root / "info" / "L3" / "cbm_mask").write_text("7ff\n")
    (root / "schemata").write_text("L3:0=7ff;1=7ff\nMB:0=100;1=100\n")
    cpuinfo = root.parent / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\n")
    return ResctrlFS(root, cpuinfo)


def test_group_lifecycle_on_a_fake_tree(tmp_path: Path) -> None:
    fs = fake_resctrl(tmp_path / "resctrl")
    assert fs.probe() == (True, "")
    group = ResctrlGroup("koordlet-u1", l3=((None, 0, 30),), mb=((None, 50),))
    assert fs.ensure(group) == ("created", "L3:0=f;1=f;MB:0=50;1=50")
    schemata = tmp_path / "resctrl" / "koordlet-u1" / "schemata"
    assert schemata.read_text() == "MB:0=50;1=50\n"  # the last line written (one per write)
    # The kernel would now show both lines; once they match nothing is written.
    schemata.write_text("L3:0=00f;1=f\nMB:0=50;1=50\n")
    assert fs.ensure(group)[0] == "unchanged"
    schemata.write_text("L3:0=7ff;1=7ff\nMB:0=50;1=50\n")  # reset behind our back
    assert fs.ensure(group)[0] == "updated" and schemata.read_text() == "L3:0=f;1=f\n"
    (tmp_path / "resctrl" / "other").mkdir()  # not ours: never listed or removed
    (tmp_path / "resctrl" / "mon_groups").mkdir()  # the kernel's
    assert fs.groups(["koordlet-"]) == ["koordlet-u1"]
    assert fs.groups([]) == [] and fs.groups([""]) == []  # no prefix names every group
    assert fs.remove("koordlet-u1") == ("removed", "")
    assert fs.remove("koordlet-u1") == ("absent", "")
    assert fs.groups(["koordlet-"]) == [] and (tmp_path / "resctrl" / "other").is_dir()
    for name in ("../etc", "a/b", "", ".", "info", "mon_groups"):
        assert fs.remove(name)[0] == "failed", name
    assert (tmp_path / "resctrl" / "mon_groups").is_dir()


def test_probe_without_rdt_hardware(tmp_path: Path) -> None:
    ok, why = ResctrlFS(tmp_path / "nothing").probe()
    assert not ok and "no resctrl filesystem" in why


def _server(tmp_path: Path, resctrl_root: Path) -> PolicyServer:
    rules = tmp_path / "rules.yaml"
    rules.write_text("features: {Resctrl: true}\n")
    from policy_server.node.execution import ExecutorMode

    server = PolicyServer(ServerOptions(
        rules_path=rules, executor_mode=ExecutorMode.ON, cgroup_root=tmp_path / "cgroup",
        resctrl_root=resctrl_root, proc_root=tmp_path / "proc"))  # fmt: skip
    server.probe_node()
    return server


def _create(uid: str) -> dict[str, Any]:
    annotations = {RESCTRL: json.dumps({"llc": {"schemata": {"range": [0, 30]}}})}
    return envelope("CreateContainer", pod=pod(uid=uid, annotations=annotations),
                    container=container())  # fmt: skip


async def test_rdt_class_only_for_a_group_that_exists(tmp_path: Path) -> None:
    fake_resctrl(tmp_path / "resctrl")
    server = _server(tmp_path, tmp_path / "resctrl")
    evaluation = await server.handle("koordinator-qos", request(_create("u1")))
    assert evaluation.reply["adjust"]["linux"]["resources"] == {"rdt_class": "koordlet-u1"}
    assert (tmp_path / "resctrl" / "koordlet-u1").is_dir()
    removal = envelope("RemovePodSandbox", pod=pod(uid="u1", annotations={
        RESCTRL: json.dumps({"llc": {"schemata": {"range": [0, 30]}}})}))  # fmt: skip
    await server.handle("koordinator-qos", request(removal))
    assert not (tmp_path / "resctrl" / "koordlet-u1").exists()


async def test_no_rdt_class_without_resctrl(tmp_path: Path) -> None:
    server = _server(tmp_path, tmp_path / "no-resctrl")
    evaluation = await server.handle("koordinator-qos", request(_create("u2")))
    assert "adjust" not in evaluation.reply
    (warning,) = [w for w in evaluation.reply["warnings"] if "rdt_class" in w]
    assert "koordlet-u2" in warning and "no resctrl filesystem" in warning
    state = server.node_state()
    assert state["resctrl"]["usable"] is False


def test_prune_removes_only_the_owned_groups_no_effect_asks_for(tmp_path: Path) -> None:
    from policy_server.node.resctrl_groups import ResctrlGroups
    from policy_server.sdk import NodePlan

    fs = fake_resctrl(tmp_path / "resctrl")
    for name in ("koordlet-live", "koordlet-gone", "mine-gone", "someone-elses"):
        (fs.root / name).mkdir()
    groups = ResctrlGroups(fs)
    plan = NodePlan(resctrl_prefixes=("koordlet-",)).merged(NodePlan(resctrl_prefixes=("mine-",)))
    drift = groups.prune(plan.resctrl_prefixes, {"koordlet-live"})
    assert (drift.level, drift.found, drift.fixed, drift.errors) == ("resctrl", 2, 2, ())
    left = sorted(p.name for p in fs.root.iterdir() if p.is_dir() and p.name != "info")
    assert left == ["koordlet-live", "someone-elses"]
    assert groups.prune((), set()).found == 0  # a plan owning no prefix removes nothing
    assert (fs.root / "someone-elses").is_dir()
