"""Issue 42's acceptance: the shipped rules, replayed with every koordinator label/annotation
combination a pod author could set on Burstable and BestEffort pods, never give a container
more CPU, memory, OOM protection or devices than kubelet's request said.

In-process through the policy test kit (``PolicyRunner``: the server's request path and the
bridge's reply check), with hypothesis drawing the pod's koordinator keys
(``keys.TRUSTED_KEYS``) with hostile values: plausible koordinator JSON with extreme numbers,
wrong types, invalid JSON, control characters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.contract.field_limits import KEY, TEXT, limit_problem
from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.authority import STRONGEST_CLASS
from policy_server.policies.koordinator_qos.hooks.resctrl import class_bound
from policy_server.policies.koordinator_qos.qos import QOSClass
from policy_server.policies.koordinator_qos.rules import Rules, Trust, rules_from_yaml
from policy_server.policies.koordinator_qos.target import PodTarget
from policy_server.sdk import BVT_FILE, CgroupWrite, ResctrlGroup, parse_cpu_list
from policy_server.testing import InvalidRequest, PolicyRunner
from tests.policy_server.factory import container, envelope, pod, request

REPO = Path(__file__).resolve().parents[3]
SHIPPED = {
    "production": REPO / "deploy/kubernetes/overlays/production/rules.yaml",
    "example": REPO / "examples/koordinator-rules.yaml",
}
RUNNERS = {name: PolicyRunner.builtin("koordinator-qos", path) for name, path in SHIPPED.items()}
RULES = {name: rules_from_yaml(path.read_text()) for name, path in SHIPPED.items()}
# The example's topology: the only CPUs a cpuset may come from (the operator's pools).
POOL_CPUS = parse_cpu_list("0-15")

numbers = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.sampled_from([-1000, -997, -1, 0, 1, 2, 999, 1000]),
)
quantities = st.one_of(
    st.sampled_from(["64k", "500", "2Gi", "1Ti", "-1", "0", "1e18", "max", ""]),
    numbers.map(str),
)
hostile_text = st.one_of(
    st.sampled_from(["{", "null", "[]", "\x00", "0-63", "-1000", "true", '{"cpuset":"0-9999"}']),
    st.text(max_size=20),
)
cpusets = st.sampled_from(["0-63", "0", "0-1", "0-15", "2-3", "", "0-7,8-15", "64-127"])
batch = st.dictionaries(
    st.sampled_from([keys.RESOURCE_BATCH_CPU, keys.RESOURCE_BATCH_MEMORY]), quantities,
    max_size=2,
)
container_spec = st.fixed_dictionaries({}, optional={"requests": batch, "limits": batch})
devices = st.lists(
    st.fixed_dictionaries({"minor": st.integers(-1, 64)}, optional={
        "resources": st.dictionaries(st.sampled_from([keys.RESOURCE_GPU_MEMORY_RATIO,
                                                      keys.RESOURCE_GPU_MEMORY]), quantities)}),
    max_size=8,
)
ANNOTATION_VALUES: dict[str, st.SearchStrategy[Any]] = {
    keys.ANNOTATION_RESOURCE_STATUS: st.fixed_dictionaries({"cpuset": cpusets}, optional={
        "numaNodeResources": st.lists(st.fixed_dictionaries({
            "node": st.integers(0, 3), "resources": st.fixed_dictionaries({"cpu": quantities})}),
            max_size=2)}),
    keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: st.fixed_dictionaries(
        {"containers": st.dictionaries(st.sampled_from(["app", "other"]), container_spec)}),
    keys.ANNOTATION_DEVICE_ALLOCATED: st.dictionaries(
        st.sampled_from(["gpu", "rdma", "fpga"]), devices, max_size=2),
    keys.ANNOTATION_CPU_QOS: st.fixed_dictionaries({}, optional={
        "enable": st.booleans(), "groupIdentity": st.integers(-1, 2)}),
    keys.ANNOTATION_RESCTRL: st.fixed_dictionaries({}, optional={
        "llc": st.fixed_dictionaries({}, optional={
            "schemata": st.fixed_dictionaries({"range": st.lists(st.integers(-5, 120),
                                                                 min_size=2, max_size=2)}),
            "schemataPerCache": st.lists(st.fixed_dictionaries({
                "cacheID": st.integers(0, 2),
                "range": st.lists(st.integers(-5, 120), min_size=2, max_size=2)}), max_size=2)}),
        "mb": st.fixed_dictionaries({"schemata": st.fixed_dictionaries(
            {"percent": st.integers(0, 150)})})}),
    keys.ANNOTATION_OOM_SCORE_ADJ: numbers.map(str),
    keys.ANNOTATION_OOM_SCORE_ADJ_SPEC: st.fixed_dictionaries({"app": numbers}),
}
LABEL_VALUES: dict[str, st.SearchStrategy[str]] = {
    keys.LABEL_QOS_CLASS: st.sampled_from(["LSE", "LSR", "LS", "BE", "SYSTEM", "", "lsr"]),
    keys.LABEL_GPU_ISOLATION_PROVIDER: st.sampled_from(["HAMi-core", "other"]),
    keys.LABEL_CORE_SCHED_GROUP_ID: st.text(max_size=8),
    keys.LABEL_CORE_SCHED_POLICY: st.sampled_from(["exclusive", "none", ""]),
}
assert set(ANNOTATION_VALUES) | set(LABEL_VALUES) == set(keys.TRUSTED_KEYS)


@st.composite
def metadata(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str]]:
    labels = {k: draw(v) for k, v in LABEL_VALUES.items() if draw(st.booleans())}
    annotations: dict[str, str] = {}
    for key, values in ANNOTATION_VALUES.items():
        if draw(st.booleans()):
            good = draw(st.booleans())
            annotations[key] = json.dumps(draw(values)) if good else draw(hostile_text)
    if keys.ANNOTATION_OOM_SCORE_ADJ in annotations and draw(st.booleans()):
        annotations[keys.ANNOTATION_OOM_SCORE_ADJ] = draw(numbers.map(str))
    return labels, annotations


@st.composite
def kubelet(draw: st.DrawFn) -> tuple[str, dict[str, Any], int]:
    """(cgroup parent, container resources, oom_score_adj) as kubelet sets them."""
    if draw(st.booleans()):
        return "/kubepods/besteffort/pod1", {"cpu": {"shares": 2}}, 1000
    request = draw(st.integers(1, 8000))
    cpu: dict[str, Any] = {"shares": max(2, request * 1024 // 1000), "period": 100000}
    if draw(st.booleans()):
        cpu["quota"] = max(1000, draw(st.integers(request, 16000)) * 100)
    memory = draw(st.one_of(st.none(), st.integers(4 * 1024**2, 64 * 1024**3)))
    resources = {"cpu": cpu, **({"memory": {"limit": memory}} if memory else {})}
    return "/kubepods/burstable/pod1", resources, draw(st.integers(3, 999))


def _bounded(kubelet_value: int | None, value: int | None) -> bool:
    """A limit the reply sets is not above kubelet's (no limit from kubelet: anything)."""
    if value is None or kubelet_value is None or kubelet_value <= 0:
        return True
    return 0 < value <= kubelet_value


# Koordinator classes, weakest first: a pod's class may be no stronger than its kube QoS
# class's strongest (BestEffort: BE, Burstable: LS, Guaranteed: LSE), SYSTEM never.
STRENGTH = [QOSClass.BE, QOSClass.LS, QOSClass.LSR, QOSClass.LSE, QOSClass.SYSTEM]


def check_class(target: PodTarget) -> None:
    """The class the policy gives the pod is no stronger than kubelet's decision backs."""
    if target.qos is QOSClass.NONE:
        return  # classified by its kube QoS class, as koordinator does an unlabeled pod
    strongest = STRONGEST_CLASS[target.kube_qos]
    assert STRENGTH.index(target.qos) <= STRENGTH.index(strongest), (target.qos, strongest)


def check_resctrl(effects: Any, target: PodTarget, rules: Rules) -> None:
    """Every per-pod resctrl group is inside its class's configured group."""
    class_key, bound = class_bound(target, rules)
    for effect in effects:
        if isinstance(effect, ResctrlGroup):
            for _cache, start, end in effect.l3:
                assert bound.cat_start <= start and end <= bound.cat_end, (effect, class_key)
            for _cache, percent in effect.mb:
                assert percent <= bound.mba, (effect, class_key)


def _bvt(effects: Any) -> int | None:
    values = [e.value for e in effects if isinstance(e, CgroupWrite) and e.file == BVT_FILE]
    return values[-1] if values else None


def check_resources(res: dict[str, Any], kube: dict[str, Any], best_effort: bool) -> None:
    cpu, kcpu = res.get("cpu", {}), kube.get("cpu", {})
    assert _bounded(kcpu.get("quota"), cpu.get("quota")), (cpu, kcpu)
    assert _bounded(kube.get("memory", {}).get("limit"), res.get("memory", {}).get("limit"))
    if not best_effort and cpu.get("shares") is not None:
        assert cpu["shares"] <= kcpu["shares"], (cpu, kcpu)
    if cpu.get("cpus"):
        # No exclusive cpuset for these pods: only the operator's pools.
        assert parse_cpu_list(cpu["cpus"]) <= POOL_CPUS, cpu
    for field in ("pids", "hugepage_limits", "devices"):
        assert field not in res


@pytest.mark.parametrize("shipped", sorted(SHIPPED))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(meta=metadata(), kube=kubelet())
def test_pod_metadata_never_gives_more_than_kubelet(
    shipped: str, meta: tuple[dict[str, str], dict[str, str]],
    kube: tuple[str, dict[str, Any], int],
) -> None:
    runner = RUNNERS[shipped]
    labels, annotations = meta
    parent, resources, oom = kube
    best_effort = "besteffort" in parent
    p = pod(cgroup_parent=parent, labels=labels)
    p["annotations"] = annotations
    c = container()
    c["linux"] = {"resources": resources, "oom_score_adj": oom}
    if any(limit_problem(TEXT, v) or limit_problem(KEY, k)
           for k, v in [*labels.items(), *annotations.items()]):
        # The request decoder refuses it (a control character: docs/webhooks.md, "Field
        # limits"): it never reaches a policy, so nothing is granted.
        with pytest.raises(InvalidRequest, match="contains a"):
            runner.send(envelope("RunPodSandbox", pod=p))
        return

    sandbox = runner.send(envelope("RunPodSandbox", pod=p))
    event_pod = request(envelope("RunPodSandbox", pod=p)).pod
    assert event_pod is not None
    target = PodTarget.of(event_pod, RULES[shipped].trust)
    check_class(target)
    effects = sandbox.evaluation.decision.effects
    check_resctrl(effects, target, RULES[shipped])
    # Group identity no higher than the same pod without the label and the LS override.
    plain = {**p, "labels": {k: v for k, v in labels.items() if k != keys.LABEL_QOS_CLASS},
             "annotations": {k: v for k, v in annotations.items()
                             if k != keys.ANNOTATION_CPU_QOS}}  # fmt: skip
    unlabeled = _bvt(runner.send(envelope("RunPodSandbox", pod=plain)).evaluation.decision.effects)
    value = _bvt(effects)
    if value is not None and unlabeled is not None:
        assert value <= unlabeled, (labels, value, unlabeled)
    for effect in sandbox.evaluation.decision.effects:
        if isinstance(effect, CgroupWrite) and not best_effort:
            # kubelet's pod cgroup limits stay: no quota or memory write on a Burstable pod.
            assert effect.file not in ("cpu.cfs_quota_us", "memory.limit_in_bytes", "cpu.shares")

    created = runner.send(envelope("CreateContainer", pod=p, container=c))
    linux = created.adjust.get("linux", {})
    check_resources(linux.get("resources", {}), resources, best_effort)
    if "oom_score_adj" in linux:
        assert linux["oom_score_adj"] >= oom
    names = {e["key"] for e in created.adjust.get("env", [])}
    assert not any(n.startswith(("NVIDIA_", "CUDA_")) or n == "LD_PRELOAD" for n in names)
    assert not created.adjust.get("mounts") and not created.adjust.get("devices")

    updated = runner.send(envelope("UpdateContainer", pod=p, container=c,
                                   linux_resources=resources))
    for update in updated.update:
        check_resources(update.get("linux", {}).get("resources", {}), resources, best_effort)

    synced = runner.send(envelope("Synchronize", pods=[p], containers=[c]))
    for update in synced.update:
        check_resources(update.get("linux", {}).get("resources", {}), resources, best_effort)


def test_the_checks_fail_on_a_stronger_class() -> None:
    """The property's checkers catch what they look for: a trusted LSR label on a Burstable pod
    (koordinator's semantics) is a stronger class than kubelet's, and its whole-cache resctrl
    group is outside a Burstable pod's LS class group once LS is bounded."""
    p = pod(cgroup_parent="/kubepods/burstable/pod1", qos="LSR")
    event = request(envelope("RunPodSandbox", pod=p)).pod
    assert event is not None
    check_class(PodTarget.of(event, Trust()))  # untrusted: classified by its kube QoS
    trusted = PodTarget.of(event, Trust(annotations=frozenset({keys.LABEL_QOS_CLASS})))
    with pytest.raises(AssertionError):
        check_class(trusted)
    bounded = rules_from_yaml("node_slo: {resourceQOSStrategy: {lsClass: {resctrlQOS: "
                              "{enable: true, catRangeEndPercent: 50, mbaPercent: 40}}}}")
    target = PodTarget.of(event, Trust())
    check_resctrl((ResctrlGroup("koordlet-u", l3=((None, 0, 50),), mb=((0, 40),)),), target,
                  bounded)  # fmt: skip
    for group in (ResctrlGroup("koordlet-u", l3=((None, 0, 100),)),
                  ResctrlGroup("koordlet-u", l3=((1, 0, 51),)),
                  ResctrlGroup("koordlet-u", mb=((None, 41),))):  # fmt: skip
        with pytest.raises(AssertionError):
            check_resctrl((group,), target, bounded)
    assert _bvt((CgroupWrite("/p", BVT_FILE, 2, "p"),)) == 2
