"""The reply guard's items and scope: named items, QoS and node bounds, the selector binding
updates and evictions (bridge.webhooks.named_items, value_bounds, item_check, guard)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.config_file import parse
from bridge.errors import ConfigError
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.guard import Scope, parse_reply, parse_updates
from bridge.webhooks.kinds import CONTROL_UPDATE_KINDS, DEFAULT_ALLOW, check_allow
from bridge.webhooks.named_items import named_item_refusal
from bridge.webhooks.node_hugepages import NodeSettings, read_hugepages
from bridge.webhooks.selector import Selector
from bridge.webhooks.specs import parse_webhooks
from bridge.webhooks.value_bounds import ReplyTarget, qos_floor

GIB = 1 << 30


def pod(pod_id: str, namespace: str, parent: str = "") -> api.PodSandbox:
    p = api.PodSandbox(id=pod_id, name=f"{namespace}-pod", namespace=namespace)
    p.linux.cgroup_parent = parent
    return p


def container(cid: str, pod_id: str, oom: int | None = 500, pids: int | None = None,
              ) -> api.Container:
    c = api.Container(id=cid, pod_sandbox_id=pod_id, name="app")
    if oom is not None:
        c.linux.oom_score_adj.value = oom
    if pids is not None:
        c.linux.resources.pids.limit = pids
    return c


PODS = {"pa": pod("pa", "team-a"), "pp": pod("pp", "prod")}
CONTAINERS = {"a1": container("a1", "pa"), "p1": container("p1", "pp", pids=100)}


def lookup(cid: str) -> tuple[api.Container, api.PodSandbox | None] | None:
    c = CONTAINERS.get(cid)
    return None if c is None else (c, PODS.get(c.pod_sandbox_id))


def scope(allow: frozenset[str] = DEFAULT_ALLOW, *, event: str = "CreateContainer",
          namespaces: list[str] | None = None, target: ReplyTarget | None = None,
          hugepages: dict[str, int] | None = None) -> Scope:
    selector = Selector(namespaces=frozenset(namespaces)) if namespaces else Selector()
    own = target or ReplyTarget(container("new", "pa"), PODS["pa"])
    return Scope(event, allow, CONTAINERS.__contains__, "new", own, lookup, selector,
                 lambda: dict(hugepages or {}))


def check(reply: dict[str, Any], s: Scope) -> None:
    parse_reply(reply, "w", s)


def refused(reply: dict[str, Any], s: Scope, *text: str) -> str:
    with pytest.raises(WebhookFailure) as caught:
        check(reply, s)
    assert caught.value.kind is FailureKind.DISALLOWED, caught.value
    for t in text:
        assert t in caught.value.reason, caught.value.reason
    return caught.value.reason


# -- named items -------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["cgroup.procs", "cgroup.subtree_control", "cgroup.kill",
                                 "cgroup.type", "freezer.state", "devices.allow"])
def test_unified_keys_outside_resource_controllers_are_refused(key: str) -> None:
    assert named_item_refusal("unified", key, DEFAULT_ALLOW) is not None
    assert named_item_refusal("unified", key, DEFAULT_ALLOW | {f"unified:{key}"}) is None


@pytest.mark.parametrize("key", ["cpu.max", "cpu.bvt_warp_ns", "cpuset.cpus", "io.max",
                                 "memory.high", "memory.swap.max", "pids.max",
                                 "hugetlb.2MB.max", "rdma.max", "misc.max"])
def test_resource_controller_keys_pass(key: str) -> None:
    assert named_item_refusal("unified", key, DEFAULT_ALLOW) is None


@pytest.mark.parametrize("key", [
    "run.oci.keep_original_groups", "io.katacontainers.config.hypervisor.path",
    "io.kubernetes.cri.untrusted-workload", "io.kubernetes.cri-o.Devices",
    "io.containerd.runc.v2.group", "org.systemd.property.DeviceAllow", "nvidia.com/gpu",
    "cdi.k8s.io/vendor", "nvidia.cdi.k8s.io/gpu", "cpu-quota.crio.io",
    "container.seccomp.security.alpha.kubernetes.io/app",
    "container.apparmor.security.beta.kubernetes.io/app", "dev.gvisor.flag.network",
    "tolerate-missing-nri-plugins.noderesource.dev", "module.wasm.image/variant"])
def test_runtime_annotations_are_refused(key: str) -> None:
    assert named_item_refusal("annotations", key, DEFAULT_ALLOW) is not None
    assert named_item_refusal("annotations", key, DEFAULT_ALLOW | {f"annotations:{key}"}) is None


@pytest.mark.parametrize("key", ["policy.example.com/decided", "koordinator.sh/qosClass",
                                 "notnvidia.com/x", "example.com/io.kubernetes.cri"])
def test_other_annotations_pass(key: str) -> None:
    assert named_item_refusal("annotations", key, DEFAULT_ALLOW) is None


@pytest.mark.parametrize("name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "HTTPS_PROXY",
                                  "http_proxy", "NO_PROXY", "NVIDIA_VISIBLE_DEVICES",
                                  "NVIDIA_DRIVER_CAPABILITIES", "PYTHONPATH", "NODE_OPTIONS",
                                  "GLIBC_TUNABLES", "PATH", "SSL_CERT_FILE"])
def test_loading_routing_and_hook_env_is_refused(name: str) -> None:
    assert named_item_refusal("env", name, DEFAULT_ALLOW) is not None
    assert named_item_refusal("env", name, DEFAULT_ALLOW | {f"env:{name}"}) is None


@pytest.mark.parametrize("name", ["APP_MODE", "PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES",
                                  "GOMAXPROCS", "LANG"])
def test_ordinary_env_passes(name: str) -> None:
    assert named_item_refusal("env", name, DEFAULT_ALLOW) is None


def test_a_trailing_star_allows_a_prefix_and_only_it() -> None:
    allow = DEFAULT_ALLOW | {"annotations:nvidia.com/*"}
    assert named_item_refusal("annotations", "nvidia.com/gpu", allow) is None
    assert named_item_refusal("annotations", "run.oci.keep_original_groups", allow) is not None
    # Another class's entry never allows it.
    assert named_item_refusal("env", "NVIDIA_VISIBLE_DEVICES",
                              DEFAULT_ALLOW | {"annotations:NVIDIA_*"})


def test_refusals_in_a_reply_name_the_path_and_the_allow_entry() -> None:
    reason = refused({"adjust": {"env": [{"key": "A", "value": "1"},
                                         {"key": "LD_PRELOAD", "value": "/x.so"}]}},
                     scope(), "adjust.env[1].key", "env:LD_PRELOAD")
    assert "loads" in reason
    refused({"adjust": {"remove": {"annotations": ["io.kubernetes.cri.sandbox-id"]}}}, scope(),
            "annotations:io.kubernetes.cri.sandbox-id")
    refused({"adjust": {"linux": {"resources": {"unified": {"cgroup.procs": "1"}}}}}, scope(),
            "adjust.linux.resources.unified", "unified:cgroup.procs")
    # An env removal loads nothing: accepted.
    check({"adjust": {"remove": {"env": ["HTTP_PROXY"]}}}, scope())
    # The same replies with the items named pass.
    named = DEFAULT_ALLOW | {"env:LD_PRELOAD", "unified:cgroup.procs",
                             "annotations:io.kubernetes.cri.sandbox-id"}
    check({"adjust": {"env": [{"key": "LD_PRELOAD", "value": "/x.so"}],
                      "linux": {"resources": {"unified": {"cgroup.procs": "1"}}},
                      "remove": {"annotations": ["io.kubernetes.cri.sandbox-id"]}}},
          scope(named))


def test_updates_get_the_unified_check() -> None:
    update = {"update": [{"container_id": "a1",
                          "linux": {"resources": {"unified": {"cgroup.kill": "1"}}}}]}
    refused(update, scope(), "update[0].linux.resources.unified", "cgroup.kill")
    check(update, scope(DEFAULT_ALLOW | {"unified:cgroup.kill"}))


# -- bounds ------------------------------------------------------------------------------


@pytest.mark.parametrize(("oom", "parent", "floor"), [
    (-997, "", -997), (500, "", 3), (3, "", 3), (999, "", 3), (1000, "", 1000),
    (None, "kubepods-besteffort-pod1.slice", 1000), (None, "/kubepods/burstable/pod1", 3),
    (None, "/kubepods/pod1", -997), (None, "", -997)])
def test_qos_floor(oom: int | None, parent: str, floor: int) -> None:
    assert qos_floor(ReplyTarget(container("c", "p", oom=oom), pod("p", "x", parent))) == floor


def test_oom_score_adj_below_the_qos_floor_is_refused() -> None:
    def reply(value: int) -> dict[str, Any]:
        return {"adjust": {"linux": {"oom_score_adj": value}}}

    burstable = ReplyTarget(container("new", "pa", oom=500), PODS["pa"])
    refused(reply(-1000), scope(target=burstable), "adjust.linux.oom_score_adj", "-1000",
            "limits:oom_score_adj")
    refused(reply(2), scope(target=burstable))
    check(reply(3), scope(target=burstable))
    check(reply(1000), scope(target=burstable))
    check(reply(-1000), scope(DEFAULT_ALLOW | {"limits:oom_score_adj"}, target=burstable))
    guaranteed = ReplyTarget(container("new", "pa", oom=-997), PODS["pa"])
    check(reply(-997), scope(target=guaranteed))
    refused(reply(-998), scope(target=guaranteed))
    # A value at or above the container's own is never refused (kube-proxy style -999).
    node_daemon = ReplyTarget(container("new", "pa", oom=-999), PODS["pa"])
    check(reply(-999), scope(target=node_daemon))


def test_pids_limit_removal_is_refused() -> None:
    def update(cid: str, limit: int) -> dict[str, Any]:
        return {"update": [{"container_id": cid,
                            "linux": {"resources": {"pids": {"limit": limit}}}}]}

    refused(update("p1", -1), scope(), "update[0].linux.resources.pids.limit", "limits:pids")
    refused(update("p1", 0), scope())
    check(update("p1", 50), scope())
    check(update("p1", -1), scope(DEFAULT_ALLOW | {"limits:pids"}))
    # a1 has no pids limit: "unlimited" removes nothing.
    check(update("a1", -1), scope())
    # Unknown to the bridge (no lookup): refused.
    blind = Scope("UpdateContainers", CONTROL_UPDATE_KINDS, lambda cid: True)
    with pytest.raises(WebhookFailure, match="not known"):
        parse_updates(update("zz", -1)["update"], blind, "update")


def test_hugepage_limits_are_bounded_by_the_node() -> None:
    def reply(size: str, limit: int) -> dict[str, Any]:
        return {"adjust": {"linux": {"resources": {"hugepage_limits": [
            {"page_size": size, "limit": limit}]}}}}

    node = {"2MB": GIB}
    refused(reply("2MB", 1 << 40), scope(hugepages=node),
            "adjust.linux.resources.hugepage_limits[0].limit", "limits:hugepages")
    refused(reply("2MB", GIB + 1), scope(hugepages=node))
    refused(reply("1GB", GIB), scope(hugepages=node), "1GB")
    check(reply("2MB", GIB), scope(hugepages=node))
    check(reply("1GB", 0), scope(hugepages=node))
    check(reply("2MB", 1 << 40), scope(DEFAULT_ALLOW | {"limits:hugepages"}, hugepages=node))
    # The container's own limit bounds it too (the node read is not even needed).
    own = container("new", "pa")
    own.linux.resources.hugepage_limits.add(page_size="1GB", limit=4 * GIB)
    check(reply("1GB", 4 * GIB), scope(target=ReplyTarget(own, PODS["pa"])))


def test_node_hugepages_from_a_fake_sysfs(tmp_path: Path) -> None:
    base = tmp_path / "kernel" / "mm" / "hugepages"
    for name, pages in (("hugepages-2048kB", "512\n"), ("hugepages-1048576kB", "2"),
                        ("hugepages-64kB", "junk"), ("not-a-size", "9")):
        (base / name).mkdir(parents=True)
        (base / name / "nr_hugepages").write_text(pages)
    assert read_hugepages(str(tmp_path)) == {"2MB": 512 * 2 * 1024 * 1024, "1GB": 2 * GIB}
    assert read_hugepages(str(tmp_path / "missing")) == {}
    assert NodeSettings.parse({"sysfs_root": str(tmp_path)}).hugepages()["1GB"] == 2 * GIB
    with pytest.raises(ConfigError, match=r"node\.sysfs_root"):
        NodeSettings.parse({"sysfs_root": "relative"})
    with pytest.raises(ConfigError, match=r"node\.root"):
        NodeSettings.parse({"root": "/sys"})


# -- scope -------------------------------------------------------------------------------


def test_updates_and_evictions_outside_the_selector_are_refused() -> None:
    scoped = scope(namespaces=["team-a"])
    prod_update = {"update": [{"container_id": "p1",
                               "linux": {"resources": {"cpu": {"shares": 2}}}}]}
    reason = refused(prod_update, scoped, "update[0].container_id", "'p1'", "'prod'",
                     "outside the webhook's selector")
    assert "prod-pod" in reason
    refused({"evict": [{"container_id": "p1"}]}, scoped, "evict[0].container_id", "'prod'")
    # The same inside the scope, and with an unrestricted selector, pass.
    team_update = {"update": [{"container_id": "a1",
                               "linux": {"resources": {"cpu": {"shares": 2}}}}]}
    check(team_update, scoped)
    check({"evict": [{"container_id": "a1"}]}, scoped)
    check(prod_update, scope())
    # The event's own container is in scope (it was selected), even if the cache lacks it.
    check({"evict": [{"container_id": "new"}]}, scoped)


def test_unknown_targets_are_refused() -> None:
    for reply in ({"evict": [{"container_id": "nope"}]},
                  {"update": [{"container_id": "nope",
                               "linux": {"resources": {"cpu": {"shares": 2}}}}]}):
        with pytest.raises(WebhookFailure) as caught:
            check(reply, scope())
        assert caught.value.kind is FailureKind.INVALID
        assert "unknown container 'nope'" in caught.value.reason


def test_a_container_whose_pod_is_unknown_is_outside_a_restricted_selector() -> None:
    orphan = Scope("CreateContainer", DEFAULT_ALLOW, lambda cid: True,
                   selector=Selector(namespaces=frozenset({"team-a"})))
    with pytest.raises(WebhookFailure, match="pod not known"):
        check({"evict": [{"container_id": "x"}]}, orphan)


# -- the allow list's config -------------------------------------------------------------


def test_named_entries_in_the_config() -> None:
    assert "env:NVIDIA_VISIBLE_DEVICES" in check_allow(
        ["env", "env:NVIDIA_VISIBLE_DEVICES"], "allow")
    for entries, text in (
            (["env:LD_PRELOAD"], "needs the kind 'env'"),
            (["resources", "limits:swap"], "unknown limit 'swap'"),
            (["resources", "cgroups:cgroup.procs"], "unknown class 'cgroups'"),
            (["env", "env:"], "expected env:<name>"),
            (["resources", "bogus"], "unknown kind 'bogus'")):
        with pytest.raises(ConfigError, match=text) as caught:
            check_allow(entries, "webhooks[0].allow")
        assert caught.value.key == f"webhooks[0].allow[{len(entries) - 1}]"
    with pytest.raises(ConfigError, match="cannot be allowed here"):
        check_allow(["resources", "env:X"], "updates.allow", CONTROL_UPDATE_KINDS)
    spec = parse_webhooks([{"name": "w", "url": "unix:///p.sock",
                            "allow": ["annotations", "annotations:run.oci.*"]}])[0]
    assert spec.allow == frozenset({"annotations", "annotations:run.oci.*"})


def test_the_config_file_sections() -> None:
    config = parse({"node": {"sysfs_root": "/fake/sys"},
                    "updates": {"allow": ["resources", "unified:cgroup.procs"]}})
    assert config.node.sysfs_root == "/fake/sys"
    assert config.control_allow == frozenset({"resources", "unified:cgroup.procs"})
    default = parse({})
    assert default.control_allow == CONTROL_UPDATE_KINDS
    assert default.node.sysfs_root == "/sys"
    for document, key in (({"updates": {"allow": ["env"]}}, "updates.allow[0]"),
                          ({"updates": {"allow": "resources"}}, "updates.allow"),
                          ({"node": {"sysfs_root": 3}}, "node.sysfs_root")):
        with pytest.raises(ConfigError) as caught:
            parse(document)
        assert caught.value.key == key
