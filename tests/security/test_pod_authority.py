"""Issue 42.1: a pod's metadata makes its containers weaker, never stronger, than kubelet made
them. Each finding against the real ``nri-policy-server`` process with the shipped rules and a
fake cgroup v2 root: the pod author's annotations and labels are refused (a warning naming pod,
key and rule, and the ``authority_refusals`` counter), and with ``trust`` configured
koordinator's behaviour comes back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bridge.kube.node import NodeSpec
from bridge.trial.node_root import write_node
from policy_server.policies.koordinator_qos.qos_node_plan import plan_node
from policy_server.policies.koordinator_qos.rules import rules_from_yaml
from tests.e2e.policy_proc import PolicyServer
from tests.policy_server.factory import (
    cgroup_v2_root,
    container,
    envelope,
    pod,
    request,
)

pytestmark = pytest.mark.processes  # starts processes: not in make check

REPO = Path(__file__).resolve().parents[2]
# The production rules as the node-effects component ships them (Resctrl and OOMScoreAdj on:
# the production overlay alone has both off since they became a per-node-pool choice).
PRODUCTION = REPO / "deploy/kubernetes/components/node-effects/rules.yaml"
EXAMPLE = REPO / "examples/koordinator-rules.yaml"
UID = "0f0e0d0c-0000-4000-8000-000000000042"
BURSTABLE = f"kubepods-burstable-pod{UID.replace('-', '_')}.slice"
POD_DIR = ("kubepods.slice", "kubepods-burstable.slice", BURSTABLE)
# kubelet's values for a Burstable container: 100m request and limit, 256Mi limit, its OOM score.
KUBELET_CPU = {"shares": 102, "quota": 10000, "period": 100000}
MIB = 1024**2


def _rules(path: Path, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return {**doc, **extra}


@pytest.fixture
def cgroup_root(workdir: Path) -> Path:
    root = cgroup_v2_root(workdir / "cgroup")
    pod_dir = root.joinpath(*POD_DIR)
    pod_dir.mkdir(parents=True)
    (pod_dir / "cpu.max").write_text("50000 100000\n")
    (pod_dir / "cpu.weight").write_text("4\n")
    (pod_dir / "memory.max").write_text(f"{256 * MIB}\n")
    return root


def serve(workdir: Path, cgroup_root: Path, rules: dict[str, Any]) -> Iterator[PolicyServer]:
    """A policy server with `rules` on fake node roots below `workdir` (cgroup v2 at
    `cgroup_root`, proc and resctrl beside it), stopped when the fixture ends."""
    # The node itself is fake too (issue 45's node truth reads it): `try`'s default node (8 CPUs,
    # 32 GiB), whatever the machine running the test has.
    sys_root = write_node(NodeSpec(), workdir)
    server = PolicyServer(workdir / "ps", rules=rules, extra_args=(
        "--cgroup-root", str(cgroup_root), "--cgroup-version", "2",
        "--proc-root", str(workdir / "proc"), "--resctrl-root", str(workdir / "resctrl"),
        "--sys-root", str(sys_root)))
    server.start()
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


@pytest.fixture
def production(workdir: Path, cgroup_root: Path) -> Iterator[PolicyServer]:
    yield from serve(workdir, cgroup_root, _rules(PRODUCTION))


def post(server: PolicyServer, event: str, **payload: Any) -> dict[str, Any]:
    transport = httpx.HTTPTransport(uds=str(server.socket))
    with httpx.Client(transport=transport, base_url="http://ps", timeout=10.0) as client:
        reply = client.post("/v1/policies/koordinator-qos", json=envelope(event, **payload))
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def refusals(server: PolicyServer) -> dict[tuple[str, str], float]:
    """``policy_koordinator_qos_authority_refusals_total`` by (key, rule)."""
    out: dict[tuple[str, str], float] = {}
    for line in server.get_text("/metrics").splitlines():
        if line.startswith("policy_koordinator_qos_authority_refusals_total{"):
            labels, value = line.rsplit(" ", 1)
            parts = dict(p.split("=", 1) for p in labels[labels.index("{") + 1:-1].split(","))
            assert parts["policy"] == '"koordinator-qos"'
            out[parts["key"].strip('"'), parts["rule"].strip('"')] = float(value)
    return out


def burstable_pod(**kwargs: Any) -> dict[str, Any]:
    body = pod(uid=UID, name="web", cgroup_parent=BURSTABLE, **kwargs)
    body["namespace"] = "team-a"
    return body


def app(**kwargs: Any) -> dict[str, Any]:
    body = container(cpu=dict(KUBELET_CPU), memory_limit=256 * MIB, **kwargs)
    body["linux"]["oom_score_adj"] = 968
    return body


def resources_of(reply: dict[str, Any]) -> dict[str, Any]:
    return dict(reply.get("adjust", {}).get("linux", {}).get("resources", {}))


RS = "scheduling.koordinator.sh/resource-status"


def test_a_forged_cpuset_gets_no_pinning_and_the_pod_cpu_max_stays(
    production: PolicyServer, cgroup_root: Path
) -> None:
    p = burstable_pod(annotations={RS: {"cpuset": "0-63"}})
    sandbox = post(production, "RunPodSandbox", pod=p)
    assert (cgroup_root.joinpath(*POD_DIR) / "cpu.max").read_text() == "50000 100000\n"
    assert any(RS in w and "exclusive-cpuset" in w and "team-a/web" in w
               for w in sandbox.get("warnings", []))
    reply = post(production, "CreateContainer", pod=p, container=app())
    cpu = resources_of(reply).get("cpu", {})
    assert cpu.get("quota") != -1 and cpu.get("cpus") != "0-63", reply
    assert any("exclusive-cpuset" in w for w in reply["warnings"])
    assert refusals(production)[RS, "exclusive-cpuset"] >= 2


def test_the_be_label_without_batch_memory_keeps_kubelet_limits(production: PolicyServer) -> None:
    spec = {"containers": {"app": {"requests": {"kubernetes.io/batch-cpu": "64k"}}}}
    p = burstable_pod(qos="BE", annotations={"node.koordinator.sh/extended-resource-spec": spec})
    reply = post(production, "CreateContainer", pod=p, container=app())
    res = resources_of(reply)
    assert res.get("memory", {}).get("limit") in (None, 256 * MIB), reply
    assert res.get("cpu", {}).get("shares") in (None, 102), reply
    assert res.get("cpu", {}).get("quota") in (None, 10000), reply
    assert any("limit-above-kubelet" in w and "extended-resource-spec" in w
               for w in reply["warnings"])
    counts = refusals(production)
    assert counts["node.koordinator.sh/extended-resource-spec", "limit-above-kubelet"] >= 3


def test_oom_score_adj_minus_1000_is_refused_at_create_and_by_the_reconciler(
    production: PolicyServer,
) -> None:
    p = burstable_pod(annotations={"koordinator.sh/oom-score-adj": "-1000"})
    reply = post(production, "CreateContainer", pod=p, container=app())
    assert "oom_score_adj" not in reply.get("adjust", {}).get("linux", {}), reply
    assert any("oom-below-kubelet" in w and "koordinator.sh/oom-score-adj" in w
               for w in reply["warnings"])
    assert refusals(production)["koordinator.sh/oom-score-adj", "oom-below-kubelet"] == 1
    # The node reconciler's plan (what it writes into /proc/<pid>/oom_score_adj every pass).
    sync = request(envelope("Synchronize", pods=[p], containers=[app()]))
    rules = rules_from_yaml(PRODUCTION.read_text())
    assert plan_node(sync, rules).oom_scores == ()
    within = burstable_pod(annotations={"koordinator.sh/oom-score-adj": "990"})
    sync = request(envelope("Synchronize", pods=[within], containers=[app()]))
    assert [s.value for s in plan_node(sync, rules).oom_scores] == [990]  # weaker: honoured


DA = "scheduling.koordinator.sh/device-allocated"
EIGHT_GPUS = {"gpu": [{"minor": m} for m in range(8)]}


def test_a_device_allocation_without_the_device_plugin_gets_no_gpus(
    workdir: Path, cgroup_root: Path
) -> None:
    for server in serve(workdir, cgroup_root, _rules(EXAMPLE)):
        p = burstable_pod(annotations={DA: EIGHT_GPUS})
        reply = post(server, "CreateContainer", pod=p, container=app())
        env = {e["key"]: e["value"] for e in reply.get("adjust", {}).get("env", [])}
        assert "NVIDIA_VISIBLE_DEVICES" not in env, reply
        assert any("device-not-allocated" in w for w in reply["warnings"])
        # The device plugin passed GPU 3: an allocation naming it alone is honoured.
        one = burstable_pod(annotations={DA: {"gpu": [{"minor": 3}]}})
        given = post(server, "CreateContainer", pod=one,
                     container=app(env=["NVIDIA_VISIBLE_DEVICES=3"]))
        assert given["adjust"]["env"] == [{"key": "NVIDIA_VISIBLE_DEVICES", "value": "3"}]


def test_trust_brings_koordinator_semantics_back(workdir: Path, cgroup_root: Path) -> None:
    trust = {"trust": {"annotations": [RS, DA], "namespaces": []}}
    for server in serve(workdir, cgroup_root, _rules(EXAMPLE, **trust)):
        p = burstable_pod(annotations={RS: json.dumps({"cpuset": "0-1"}), DA: EIGHT_GPUS})
        reply = post(server, "CreateContainer", pod=p, container=app())
        assert resources_of(reply)["cpu"]["quota"] == -1
        env = {e["key"]: e["value"] for e in reply["adjust"]["env"]}
        assert env["NVIDIA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
        assert refusals(server) == {}
