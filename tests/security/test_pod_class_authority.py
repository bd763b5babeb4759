"""Issue 42.1, the parts a pod's QoS class decides: the ``koordinator.sh/qosClass`` label claims a
class no stronger than kubelet's QoS class backs, and a ``node.koordinator.sh/resctrl`` group
gets no more LLC or memory bandwidth than its class's group. Against the real
``nri-policy-server`` process with the shipped production rules, a fake cgroup v2 root and a
fake resctrl tree: what the pod author asked for is refused (a warning naming pod, key and rule,
and the ``authority_refusals`` counter), and with ``trust`` koordinator's behaviour comes back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.policy_proc import PolicyServer
from tests.policy_server.factory import cgroup_v2_root, container, pod
from tests.security.test_pod_authority import PRODUCTION, _rules, post, refusals, serve

pytestmark = pytest.mark.processes  # starts processes: not in make check

UID = "0f0e0d0c-0000-4000-8000-0000000000be"
BEST_EFFORT = f"kubepods-besteffort-pod{UID.replace('-', '_')}.slice"
POD_DIR = ("kubepods.slice", "kubepods-besteffort.slice", BEST_EFFORT)
BURSTABLE_UID = "0f0e0d0c-0000-4000-8000-0000000000b5"
BURSTABLE = f"kubepods-burstable-pod{BURSTABLE_UID.replace('-', '_')}.slice"
LABEL = "koordinator.sh/qosClass"
RESCTRL = "node.koordinator.sh/resctrl"
# The production rules: LSR and LS groupIdentity 2, BE -1; beClass resctrlQOS 0-30 %.
SYSTEM_CPUS = {"node.koordinator.sh/system-qos-resource": {"cpuset": "0-1"},
               "node.koordinator.sh/cpu-shared-pools": [{"socket": 0, "node": 0,
                                                         "cpuset": "2-7"}]}  # fmt: skip


@pytest.fixture
def node(workdir: Path) -> Path:
    """A fake node: a cgroup v2 root with the BestEffort pod's cgroup (an Anolis kernel: it has
    ``cpu.bvt_warp_ns``) and a resctrl tree with one 11-way L3 cache."""
    root = cgroup_v2_root(workdir / "cgroup")
    pod_dir = root.joinpath(*POD_DIR)
    pod_dir.mkdir(parents=True)
    (pod_dir / "cpu.bvt_warp_ns").write_text("0\n")
    resctrl = workdir / "resctrl"
    (resctrl / "info" / "L3").mkdir(parents=True)
    (resctrl / "info" / "L3" / "cbm_mask").write_text("7ff\n")
    (resctrl / "schemata").write_text("L3:0=7ff\nMB:0=100\n")
    return workdir


@pytest.fixture
def production(node: Path) -> Iterator[PolicyServer]:
    yield from serve(node, node / "cgroup", _rules(PRODUCTION))


def best_effort_pod(**kwargs: Any) -> dict[str, Any]:
    body = pod(uid=UID, name="batch", cgroup_parent=BEST_EFFORT, **kwargs)
    body["namespace"] = "team-a"
    return body


def bvt(node: Path) -> str:
    return (node / "cgroup").joinpath(*POD_DIR, "cpu.bvt_warp_ns").read_text().strip()


def _warned(reply: dict[str, Any], *parts: str) -> bool:
    return any(all(p in w for p in parts) for w in reply.get("warnings", []))


def test_a_best_effort_pod_labelled_lsr_keeps_the_be_group_identity(
    production: PolicyServer, node: Path
) -> None:
    sandbox = post(production, "RunPodSandbox", pod=best_effort_pod(qos="LSR"))
    assert bvt(node) == "-1", sandbox  # the BE class's value, not LSR's 2
    assert _warned(sandbox, "team-a/batch", LABEL, "qos-class-above-kubelet")
    # Each event says it once, however many hooks read the class.
    assert sum(LABEL in w for w in sandbox["warnings"]) == 1
    assert refusals(production)[LABEL, "qos-class-above-kubelet"] == 1
    # LS is also stronger than BestEffort; BE (its own class) is honoured without a word.
    post(production, "RunPodSandbox", pod=best_effort_pod(qos="LS"))
    assert bvt(node) == "-1"
    honest = post(production, "RunPodSandbox", pod=best_effort_pod(qos="BE"))
    assert bvt(node) == "-1" and not _warned(honest, LABEL)
    assert refusals(production)[LABEL, "qos-class-above-kubelet"] == 2


def test_system_only_through_trust(node: Path) -> None:
    rules = _rules(PRODUCTION, topology=SYSTEM_CPUS)
    burstable = pod(uid=BURSTABLE_UID, name="web", cgroup_parent=BURSTABLE, qos="SYSTEM")
    burstable["namespace"] = "team-a"
    ctr = container(cpu={"shares": 102, "quota": 10000, "period": 100000})
    for server in serve(node, node / "cgroup", rules):
        reply = post(server, "CreateContainer", pod=burstable, container=ctr)
        cpus = reply.get("adjust", {}).get("linux", {}).get("resources", {}).get("cpu", {})
        assert cpus.get("cpus") == "2-7", reply  # the shared pool, not the system cpuset 0-1
        assert _warned(reply, "team-a/web", LABEL, "qos-class-system")
        assert refusals(server) == {(LABEL, "qos-class-system"): 1}
    trusted = {**rules, "trust": {"annotations": [LABEL]}}
    for server in serve(node, node / "cgroup", trusted):
        reply = post(server, "CreateContainer", pod=burstable, container=ctr)
        assert reply["adjust"]["linux"]["resources"]["cpu"]["cpus"] == "0-1"
        assert not _warned(reply, LABEL) and refusals(server) == {}


def test_trusting_the_namespace_gives_the_label_its_class(node: Path) -> None:
    rules = _rules(PRODUCTION, trust={"namespaces": ["team-a"]})
    for server in serve(node, node / "cgroup", rules):
        post(server, "RunPodSandbox", pod=best_effort_pod(qos="LSR"))
        assert bvt(node) == "2"  # koordinator's semantics: the label decides
        assert refusals(server) == {}


def _resctrl(llc: list[int], mb: int | None = None) -> dict[str, str]:
    doc: dict[str, Any] = {"llc": {"schemata": {"range": llc}}}
    if mb is not None:
        doc["mb"] = {"schemata": {"percent": mb}}
    return {RESCTRL: json.dumps(doc)}


def test_a_resctrl_group_beyond_the_be_class_is_not_made(
    production: PolicyServer, node: Path
) -> None:
    group = node / "resctrl" / f"koordlet-{UID}"
    greedy = best_effort_pod(annotations=_resctrl([0, 100]))
    sandbox = post(production, "RunPodSandbox", pod=greedy)
    assert not group.exists(), sandbox
    assert _warned(sandbox, "team-a/batch", RESCTRL, "resctrl-above-class", "beClass")
    reply = post(production, "CreateContainer", pod=greedy, container=container())
    assert "rdt_class" not in reply.get("adjust", {}).get("linux", {}).get("resources", {})
    assert _warned(reply, "resctrl-above-class")
    assert refusals(production)[RESCTRL, "resctrl-above-class"] == 2
    # A part of the class's 0-30 % is the pod's to choose.
    modest = best_effort_pod(annotations=_resctrl([10, 30]))
    post(production, "RunPodSandbox", pod=modest)
    assert group.is_dir()
    reply = post(production, "CreateContainer", pod=modest, container=container())
    assert reply["adjust"]["linux"]["resources"]["rdt_class"] == f"koordlet-{UID}"
