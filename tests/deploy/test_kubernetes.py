"""The kustomize base, overlays and components: they render, validate, and agree with the CLIs.

Every check runs on what `kubectl kustomize` renders for the base and for each
overlay, each with every set of components (as an operator combines them), so an
overlay or component is held to the same rules; every rendered object is checked
against the Kubernetes 1.35 OpenAPI schema.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bridge.cri.runtime_service import DEFAULT_SOCKETS, default_socket
from bridge.transport import connect
from tests.deploy import support as s

pytestmark = pytest.mark.processes  # starts processes: not in make check

VARIANTS = [s.BASE, *s.OVERLAYS]
IDS = [p.name for p in VARIANTS]
COMBINATIONS = s.combinations()
COMBINATION_IDS = ["+".join([d.name, *(c.name for c in cs)]) for d, cs in COMBINATIONS]
NAMESPACE = "nri-webhook-bridge"
CRI_O = s.KUSTOMIZE / "components" / "cri-o"
NODE_EFFECTS = s.KUSTOMIZE / "components" / "node-effects"
SERVICEMONITOR = s.KUSTOMIZE / "components" / "servicemonitor"
# The opt-in label an operator puts on a node once its runtime has NRI on.
NRI_LABEL = "nri-webhook-bridge/nri"
SETTINGS = "nri-webhook-bridge-settings"
CRI_DIRECTORIES = {posixpath.dirname(p) for p in DEFAULT_SOCKETS.values()}


# The pod's checks skip the ServiceMonitor component (it adds an object, not a pod change).
POD_COMBINATIONS = [(c, i) for c, i in zip(COMBINATIONS, COMBINATION_IDS, strict=True)
                    if SERVICEMONITOR not in c[1]]


@pytest.fixture(params=[c for c, _ in POD_COMBINATIONS], ids=[i for _, i in POD_COMBINATIONS])
def pod(request: pytest.FixtureRequest) -> s.Pod:
    directory, components = request.param
    return s.Pod(s.render(s.combination(directory, components)), components)


def test_every_yaml_file_parses() -> None:
    files = s.yaml_files()
    assert len(files) >= 10
    for path in files:
        docs = s.load_docs(path)
        assert docs, f"{path} is empty"
        for doc in docs:
            assert isinstance(doc, dict), f"{path}: a document is not a mapping"


@pytest.mark.parametrize("directory", [s.BASE, *s.OVERLAYS, *s.COMPONENTS],
                         ids=[*IDS, *(c.name for c in s.COMPONENTS)])
def test_kustomization_references_exist(directory: Path) -> None:
    k = s.kustomization(directory)
    referenced = [*k.get("resources", []),
                  *(p["path"] for p in k.get("patches", []) if "path" in p)]
    referenced += [entry.partition("=")[2] or entry
                   for gen in k.get("configMapGenerator", []) for entry in gen.get("files", [])]
    referenced += [e for gen in k.get("configMapGenerator", []) for e in gen.get("envs", [])]
    assert referenced
    for rel in referenced:
        assert (directory / rel).exists(), f"{directory.name}/kustomization.yaml: {rel} missing"


def test_there_is_a_production_overlay_on_the_base() -> None:
    assert [p.name for p in s.OVERLAYS] == ["production"]
    assert "../../base" in s.kustomization(s.OVERLAYS[0])["resources"]


def test_kubectl_is_a_client_with_schemas_to_check_against() -> None:
    # kustomize v5 (kubectl >= 1.27) knows the `labels:` and `patches:` fields used here.
    major, minor = map(int, s.kubectl_version().split("."))
    assert (major, minor) >= (1, 27), f"kubectl {s.kubectl_version()} is too old"
    from kubernetes_validate.utils import all_versions

    assert s.kubectl_version() in {s.major_minor(v) for v in all_versions()}
    # And schemas of the release the manifests are for (pyproject.toml pins the package).
    assert s.TARGET_KUBERNETES in {s.major_minor(v) for v in all_versions()}


def test_every_component_is_in_the_combinations() -> None:
    assert {c.name for c in s.COMPONENTS} == {"cri-o", "node-effects", "servicemonitor"}
    assert len(COMBINATIONS) == len(VARIANTS) * 2 ** len(s.COMPONENTS)
    for directory in s.COMPONENTS:
        assert s.kustomization(directory)["kind"] == "Component"


@pytest.mark.parametrize(("directory", "components"), COMBINATIONS, ids=COMBINATION_IDS)
def test_rendered_objects_match_the_kubernetes_schema(directory: Path,
                                                      components: tuple[Path, ...]) -> None:
    """Every overlay with every set of components, for Kubernetes 1.35 (strict). The
    ServiceMonitor is a custom resource with no schema there
    (test_servicemonitor_component_selects_both_metrics_services checks it)."""
    docs = s.render(s.combination(directory, components))
    assert docs
    errors = [e for d in docs if d["kind"] != "ServiceMonitor"
              for e in [s.schema_errors(d)] if e is not None]
    assert not errors, "\n".join(errors)
    assert [d for d in docs if d["kind"] == "ServiceMonitor"] == (
        [s.one(docs, "ServiceMonitor")] if SERVICEMONITOR in components else [])


def test_schema_check_is_of_the_target_release() -> None:
    # recursiveReadOnly came with Kubernetes 1.30: an older schema refuses the manifests.
    pod = s.Pod(s.render(s.BASE))
    assert s.schema_errors(pod.daemonset) is None
    error = s.schema_errors(pod.daemonset, "1.29")
    assert error is not None and "recursiveReadOnly" in error


def test_schema_check_catches_a_misspelt_field() -> None:
    pod = s.Pod(s.render(s.BASE))
    assert s.schema_errors(pod.daemonset) is None
    pod.bridge["readOnlyRootFileSystem"] = pod.bridge["securityContext"].pop(
        "readOnlyRootFilesystem")
    error = s.schema_errors(pod.daemonset)
    assert error is not None and "readOnlyRootFileSystem" in error


def test_manifests_are_namespaced_objects_with_names(pod: s.Pod) -> None:
    kinds = sorted(d["kind"] for d in pod.docs if d["kind"] != "ServiceMonitor")
    assert kinds == ["ConfigMap", "ConfigMap", "ConfigMap", "DaemonSet", "Namespace",
                     "ResourceQuota", "Service", "Service", "ServiceAccount"]
    for doc in pod.docs:
        assert doc["apiVersion"] and doc["metadata"]["name"]
        if doc["kind"] == "Namespace":
            assert doc["metadata"]["name"] == NAMESPACE
        else:
            assert doc["metadata"]["namespace"] == NAMESPACE


def test_namespace_admits_the_hostpath_pod() -> None:
    ns = s.one(s.render(s.BASE), "Namespace")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_service_account_has_no_token(pod: s.Pod) -> None:
    sa = s.one(pod.docs, "ServiceAccount")
    assert pod.spec["serviceAccountName"] == sa["metadata"]["name"]
    assert sa["automountServiceAccountToken"] is False
    assert pod.spec["automountServiceAccountToken"] is False


def test_daemonset_runs_on_every_selected_node_as_node_critical(pod: s.Pod) -> None:
    ds = pod.daemonset
    assert ds["spec"]["selector"]["matchLabels"].items() <= (
        ds["spec"]["template"]["metadata"]["labels"].items())
    assert pod.spec["priorityClassName"] == "system-node-critical"
    # One toleration that matches every taint: operator Exists, no key, no effect.
    assert {"operator": "Exists"} in pod.spec["tolerations"]
    assert not pod.spec.get("hostNetwork", False)
    # The node's PIDs only where the rules keep running processes' OOM scores or core-sched
    # cookies (components/node-effects), not in the base or the production overlay.
    rules = s.koordinator_rules(pod.file(pod.policy, str(pod.policy_args.rules)))
    pid_effects = rules.features.OOMScoreAdj or rules.features.CoreSched
    assert pod.spec.get("hostPID", False) is pid_effects
    assert not [p for c in pod.spec["containers"] for p in c.get("ports", []) if "hostPort" in p]
    assert [c["name"] for c in pod.spec["containers"]] == ["bridge", "policy-server"]


def test_both_containers_run_programs_of_this_package(pod: s.Pod) -> None:
    scripts = s.project_scripts()
    for c in (pod.bridge, pod.policy):
        assert c["command"][0] in scripts
        assert len(c["command"]) == 1, "arguments belong in args"
    assert pod.bridge["args"][0] == "run"
    assert pod.bridge["image"] == pod.policy["image"], "one image holds both entry points"


def test_nri_socket_directory_is_mounted_from_the_host_as_a_directory(pod: s.Pod) -> None:
    socket = pod.bridge_args.nri_socket
    assert socket == connect.DEFAULT_SOCKET_PATH
    volume, inside, mount = s.volume_for(pod.spec, pod.bridge, socket)
    assert volume["hostPath"] == {"path": posixpath.dirname(socket), "type": "Directory"}
    assert mount["mountPath"] == posixpath.dirname(socket), "mount the directory, not the file"
    assert inside == "nri.sock"
    assert "subPath" not in mount
    # connect() needs no write access to the mount, so read-only is enough.
    assert mount["readOnly"] is True
    # The policy server has no business with the runtime's socket.
    assert all(m["name"] != mount["name"] for m in pod.policy["volumeMounts"])


def _cri_socket_directory_is_mounted(pod: s.Pod, runtime: str) -> None:
    """The runtime's CRI socket (where the bridge sends container updates) is the runtime's
    default, on a read-only hostPath of its directory mounted at the same path."""
    socket = pod.bridge_args.cri_socket
    assert socket == default_socket(runtime)
    volume, inside, mount = s.volume_for(pod.spec, pod.bridge, socket)
    # The directory, not the file: the runtime recreates its socket when it restarts.
    assert volume["hostPath"] == {"path": posixpath.dirname(socket), "type": "Directory"}
    assert mount["mountPath"] == posixpath.dirname(socket)
    assert inside == posixpath.basename(socket)
    assert "subPath" not in mount
    # connect() needs no write access; the directory also holds the shims' state.
    assert mount["readOnly"] is True
    assert all(m["name"] != mount["name"] for m in pod.policy["volumeMounts"])
    # One runtime's directory only.
    assert [v["hostPath"]["path"] for v in pod.spec["volumes"]
            if v.get("hostPath", {}).get("path") in CRI_DIRECTORIES] == [posixpath.dirname(socket)]


def test_cri_socket_directory_is_mounted_from_the_host_as_a_directory(pod: s.Pod) -> None:
    _cri_socket_directory_is_mounted(pod, "cri-o" if CRI_O in pod.components else "containerd")


@pytest.mark.parametrize(("directory", "components"),
                         [(d, cs) for d, cs in COMBINATIONS if CRI_O in cs],
                         ids=[i for i, (_, cs) in zip(COMBINATION_IDS, COMBINATIONS, strict=True)
                              if CRI_O in cs])
def test_cri_o_component_mounts_and_dials_cri_os_socket(directory: Path,
                                                        components: tuple[Path, ...]) -> None:
    pod = s.Pod(s.render(s.combination(directory, components)))
    _cri_socket_directory_is_mounted(pod, "cri-o")
    # Nothing else changes: the same combination without it differs in the CRI socket only.
    plain = s.Pod(s.render(s.combination(directory, tuple(c for c in components if c != CRI_O))))
    assert [a for a in pod.bridge_argv if not a.startswith("--cri-socket=")] == (
        [a for a in plain.bridge_argv if not a.startswith("--cri-socket=")])
    assert pod.policy_argv == plain.policy_argv
    for p in (pod, plain):
        p.bridge["volumeMounts"] = [m for m in p.bridge["volumeMounts"] if m["name"] != "cri"]
        p.spec["volumes"] = sorted((v for v in p.spec["volumes"] if v["name"] != "cri"),
                                   key=lambda v: v["name"])
        p.docs = [d for d in p.docs if d["kind"] != "ConfigMap"]
        for c in p.spec["containers"]:  # the settings ConfigMap's hashed name
            c.pop("env")
    assert pod.docs == plain.docs


def _reversed_args_overlay(tmp_path: Path, components: list[Path]) -> Path:
    """An overlay of an operator's own that lays the bridge's arguments out otherwise (here:
    reversed after `run`), with ``components``."""
    plain = s.Pod(s.render(s.BASE))
    args = plain.bridge["args"]
    patch = {"apiVersion": "apps/v1", "kind": "DaemonSet",
             "metadata": {"name": plain.daemonset["metadata"]["name"], "namespace": NAMESPACE},
             "spec": {"template": {"spec": {"containers": [
                 {"name": "bridge", "args": [args[0], *reversed(args[1:])]}]}}}}
    (tmp_path / "patch.yaml").write_text(yaml.safe_dump(patch), encoding="utf-8")
    rel = [os.path.relpath(p, tmp_path) for p in (s.BASE, *components)]
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [{rel[0]}]\npatches: [{{path: patch.yaml}}]\n"
        + (f"components: [{', '.join(rel[1:])}]\n" if components else ""), encoding="utf-8")
    return tmp_path


def test_cri_o_component_does_not_depend_on_argument_positions(tmp_path: Path) -> None:
    """Issue 45: the component replaced args[2] after a JSON-patch `test` of its value, so an
    overlay with the arguments in another order failed to render with it."""
    pod = s.Pod(s.render(_reversed_args_overlay(tmp_path, [CRI_O])))
    assert pod.bridge["args"][1:] == list(reversed(s.Pod(s.render(s.BASE)).bridge["args"][1:]))
    _cri_socket_directory_is_mounted(pod, "cri-o")


def test_components_and_overlays_patch_values_not_argument_lists() -> None:
    """Issue 45: overlays repeated whole `args` lists. The argument lists are the base's in
    every combination; what differs comes from the settings ConfigMap."""
    base = s.Pod(s.render(s.BASE))
    for directory, components in COMBINATIONS:
        pod = s.Pod(s.render(s.combination(directory, components)))
        for c, b in ((pod.bridge, base.bridge), (pod.policy, base.policy)):
            assert c["command"] == b["command"] and c["args"] == b["args"], (
                directory.name, [x.name for x in components], c["name"])
    for directory in [*s.OVERLAYS, *s.COMPONENTS]:
        for path in directory.glob("*.yaml"):
            for doc in s.load_docs(path):
                for c in (doc.get("spec", {}).get("template", {}).get("spec", {})
                          .get("containers", [])):
                    assert "args" not in c and "command" not in c, f"{path}: {c['name']}"
        for patch in s.kustomization(directory).get("patches", []):
            assert "/args" not in patch.get("patch", ""), f"{directory.name}: {patch}"


def test_settings_configmap_feeds_every_variable_the_args_use(pod: s.Pod) -> None:
    settings = s.one(pod.docs, "ConfigMap", next(
        e["valueFrom"]["configMapKeyRef"]["name"] for e in pod.bridge["env"]))
    assert settings["metadata"]["name"].startswith(SETTINGS + "-"), "a change rolls the pods"
    for c in (pod.bridge, pod.policy):
        used = {m for a in c["args"] for m in re.findall(r"\$\(([A-Z_]+)\)", a)}
        refs = {e["name"]: e["valueFrom"]["configMapKeyRef"] for e in c["env"]}
        assert used == set(refs), c["name"]
        for name, ref in refs.items():
            assert ref == {"name": settings["metadata"]["name"], "key": name}, (c["name"], name)
            assert name in settings["data"]


def test_an_unset_setting_is_an_error_not_a_literal() -> None:
    docs = s.render(s.BASE)
    settings = next(d for d in docs if d["metadata"]["name"].startswith(SETTINGS))
    del settings["data"]["LOG_FORMAT"]
    with pytest.raises(AssertionError, match="has no key LOG_FORMAT"):
        s.Pod(docs)
    bridge = s.container(s.one(docs, "DaemonSet")["spec"]["template"]["spec"], "bridge")
    bridge["env"] = [e for e in bridge["env"] if e["name"] != "LOG_FORMAT"]
    with pytest.raises(AssertionError, match=r"undefined variables.*LOG_FORMAT"):
        s.container_argv(docs, bridge)
    assert s.expand("a$(X)b$$(X)$(Y)", {"X": "1"}) == "a1b$(X)$(Y)"


def test_policy_socket_is_where_the_bridge_calls_it_on_a_shared_emptydir(pod: s.Pod) -> None:
    uds = pod.policy_args.uds
    unix_hooks = [w for w in pod.webhooks() if w.endpoint.socket_path is not None]
    assert unix_hooks, "the bridge config must call the pod's policy server"
    for hook in unix_hooks:
        assert hook.endpoint.socket_path == uds, hook.name
        assert hook.endpoint.path.startswith("/v1/policies/"), hook.name
    bridge_side = s.volume_for(pod.spec, pod.bridge, uds)
    policy_side = s.volume_for(pod.spec, pod.policy, uds)
    assert bridge_side[0] is policy_side[0], "both must see the same volume"
    assert "emptyDir" in bridge_side[0]
    assert bridge_side[1] == policy_side[1]


def test_control_socket_serves_the_probes_and_the_policy_server(pod: s.Pod) -> None:
    control = pod.bridge_args.control_socket
    assert control
    assert s.unix_url_path(pod.policy_args.bridge_control) == control
    bridge_side = s.volume_for(pod.spec, pod.bridge, control)
    policy_side = s.volume_for(pod.spec, pod.policy, control)
    assert bridge_side[0] is policy_side[0] and "emptyDir" in bridge_side[0]
    ready = s.curl_unix_target(pod.bridge["readinessProbe"]["exec"]["command"])
    alive = s.curl_unix_target(pod.bridge["livenessProbe"]["exec"]["command"])
    assert ready == (control, "/readyz")
    assert alive == (control, "/healthz")


def test_policy_server_probes_use_its_socket(pod: s.Pod) -> None:
    for probe in ("readinessProbe", "livenessProbe"):
        target = s.curl_unix_target(pod.policy[probe]["exec"]["command"])
        assert target == (pod.policy_args.uds, "/healthz")


def test_probes_give_the_command_time_to_finish(pod: s.Pod) -> None:
    for c in (pod.bridge, pod.policy):
        for probe in ("readinessProbe", "livenessProbe"):
            p = c[probe]
            max_time = int(s.curl_option(p["exec"]["command"], "--max-time"))
            assert max_time < p["timeoutSeconds"] <= p["periodSeconds"], (c["name"], probe)


def test_sockets_are_shared_by_group_not_by_world(pod: s.Pod) -> None:
    # 0660 sockets work through a common group and fsGroup makes the emptyDir
    # group-owned by it (other containers of the node cannot connect).
    bridge_sc, policy_sc = pod.bridge["securityContext"], pod.policy["securityContext"]
    assert bridge_sc["runAsGroup"] == policy_sc["runAsGroup"] == pod.spec["securityContext"][
        "fsGroup"]
    assert pod.policy_args.socket_mode == "0660"


def test_security_contexts_drop_everything_they_can(pod: s.Pod) -> None:
    assert pod.spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    rules = s.koordinator_rules(pod.file(pod.policy, str(pod.policy_args.rules)))
    for c in (pod.bridge, pod.policy):
        sc = c["securityContext"]
        assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
    assert "add" not in pod.bridge["securityContext"]["capabilities"]
    # Exactly the capabilities the OOM-score row of docs/deployment.md names, and only when
    # the rules turn OOMScoreAdj on.
    added = pod.policy["securityContext"]["capabilities"].get("add", [])
    assert sorted(added) == (["DAC_OVERRIDE", "SYS_RESOURCE"] if rules.features.OOMScoreAdj
                             else [])
    for c in (pod.bridge, pod.policy):
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["privileged"] is False
        assert sc["readOnlyRootFilesystem"] is True
    # Root (without capabilities) where files owned by root must be written: the NRI socket,
    # the pod cgroup files.
    assert pod.bridge["securityContext"]["runAsUser"] == 0
    assert pod.policy["securityContext"]["runAsUser"] == 0
    assert pod.policy_args.pod_cgroup_writes == "on"


def test_policy_server_writes_the_host_cgroup_tree(pod: s.Pod) -> None:
    volume, inside, mount = s.volume_for(pod.spec, pod.policy, str(pod.policy_args.cgroup_root))
    assert volume["hostPath"] == {"path": "/sys/fs/cgroup", "type": "Directory"}
    assert inside == "" and not mount.get("readOnly")
    rules = s.koordinator_rules(pod.file(pod.policy, str(pod.policy_args.rules)))
    if rules.features.Resctrl:  # the production overlay: the host's resctrl tree, writable
        volume, inside, mount = s.volume_for(pod.spec, pod.policy,
                                             str(pod.policy_args.resctrl_root))
        assert volume["hostPath"] == {"path": "/sys/fs/resctrl", "type": "Directory"}
        assert inside == "" and not mount.get("readOnly")


def test_policy_server_reaches_the_host_system_bus(pod: s.Pod) -> None:
    """Issue 24 finding 2: on systemd-driver nodes the pod slices' values are set as unit
    properties over the host's system bus (the directory mounted, read-only: connect() only)."""
    assert pod.policy_args.systemd_properties in ("auto", "on")
    address = pod.policy_args.system_bus
    assert address.startswith("unix:path="), address
    volume, inside, mount = s.volume_for(pod.spec, pod.policy, address.removeprefix("unix:path="))
    assert volume["hostPath"] == {"path": "/run/dbus", "type": "DirectoryOrCreate"}
    assert inside == "system_bus_socket", "mount the directory: dbus-daemon recreates the socket"
    assert mount["readOnly"] is True


def test_resources_are_bounded(pod: s.Pod) -> None:
    for c in (pod.bridge, pod.policy):
        res = c["resources"]
        assert s.quantity(res["requests"]["memory"]) <= s.quantity(res["limits"]["memory"])
        assert s.quantity(res["requests"]["cpu"]) > 0
        # No CPU limit: throttling would delay answers the runtime is waiting for.
        assert "cpu" not in res["limits"], c["name"]
        assert s.quantity(res["limits"]["memory"]) <= s.quantity("512Mi")


def test_bridge_config_comes_from_a_configmap_the_bridge_accepts(pod: s.Pod) -> None:
    hooks = pod.webhooks()
    assert [h.name for h in hooks] == ["koordinator-qos"]
    hook = hooks[0]
    assert hook.failure_policy.value == "Ignore"
    # The pod's own namespace is excluded: it starts before its policy server.
    assert NAMESPACE in hook.selector.exclude_namespaces
    # Budget: the webhook timeout fits in the runtime's default request timeout.
    assert hook.timeout_s < 2.0 and hook.sync_timeout_s < 2.0


def test_rules_come_from_a_hot_reloadable_configmap(pod: s.Pod) -> None:
    rules_path = str(pod.policy_args.rules)
    rules = s.koordinator_rules(pod.file(pod.policy, rules_path))
    assert rules.failure_policy.value == "Ignore"
    volume, _, mount = s.volume_for(pod.spec, pod.policy, rules_path)
    # subPath mounts never see ConfigMap updates.
    assert "subPath" not in mount
    gens = {g["name"]: g for g in s.kustomization(s.BASE)["configMapGenerator"]}
    # A stable name: the ConfigMap is updated in place instead of rolling the pods.
    assert gens[volume["configMap"]["name"]]["options"]["disableNameSuffixHash"] is True


def test_bridge_config_change_rolls_the_pods() -> None:
    gens = {g["name"]: g for g in s.kustomization(s.BASE)["configMapGenerator"]}
    assert "options" not in gens["nri-webhook-bridge-config"]


def test_production_overlay_pins_the_image_by_digest_and_logs_json() -> None:
    pod = s.Pod(s.render(s.OVERLAYS[0]))
    base = s.Pod(s.render(s.BASE))
    for c in (pod.bridge, pod.policy):
        name, _, digest = c["image"].partition("@")
        assert "/" in name and ":" not in name.rpartition("/")[2], c["image"]
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), c["image"]
    assert pod.bridge_args.log_format == pod.policy_args.log_format == "json"
    assert base.bridge_args.log_format == base.policy_args.log_format == "text"
    assert s.koordinator_rules(pod.file(pod.policy, str(pod.policy_args.rules))) != (
        s.koordinator_rules(base.file(base.policy, str(base.policy_args.rules))))
    # Apart from the log format the overlay runs the base's command lines.
    for argv, b in ((pod.bridge_argv, base.bridge_argv), (pod.policy_argv, base.policy_argv)):
        assert set(argv) ^ set(b) == {"--log-format=json", "--log-format=text"}


def test_images_are_versioned_and_not_pulled_on_every_start(pod: s.Pod) -> None:
    """Issue 45: the base ran `:latest` and production `imagePullPolicy: Always`, so a
    node-critical pod's restart depended on a registry."""
    for c in (pod.bridge, pod.policy):
        assert c["imagePullPolicy"] == "IfNotPresent", c["name"]
        name, _, digest = c["image"].partition("@")
        tag = name.rpartition("/")[2].partition(":")[2]
        assert digest or tag, f"{c['image']}: neither a tag nor a digest"
        assert tag not in ("latest",), c["image"]
    assert pod.bridge["image"] == pod.policy["image"]


def test_base_image_tag_is_the_package_version() -> None:
    pod = s.Pod(s.render(s.BASE))
    assert pod.bridge["image"] == f"nri-webhook-bridge:{s.pyproject()['project']['version']}"


def test_daemonset_selects_linux_nodes_whose_runtime_has_nri(pod: s.Pod) -> None:
    """Issue 45: nothing selected Linux or NRI-enabled nodes while every taint is tolerated
    and the hostPaths are `type: Directory`: pods waited in ContainerCreating forever."""
    assert pod.spec["nodeSelector"] == {"kubernetes.io/os": "linux", NRI_LABEL: "enabled"}
    assert "affinity" not in pod.spec
    # The docs tell the operator how to put the label on.
    assert f"kubectl label node NODE {NRI_LABEL}=enabled" in (
        s.REPO / "docs" / "deployment.md").read_text(encoding="utf-8")


def _quota_admits(docs: list[dict[str, Any]], namespace: str, priority_class: str) -> bool:
    """Whether a ResourceQuota of ``namespace`` covers pods of ``priority_class`` (what the
    ResourceQuota admission plugin asks when it limits that class): a PriorityClass scope
    selector with In/Exists matching it and a positive pod count."""
    for q in docs:
        if q["kind"] != "ResourceQuota" or q["metadata"].get("namespace") != namespace:
            continue
        exprs = q["spec"].get("scopeSelector", {}).get("matchExpressions", [])
        scoped = [e for e in exprs if e["scopeName"] == "PriorityClass"]
        if not scoped or len(scoped) != len(exprs):
            continue
        matches = all((e["operator"] == "In" and priority_class in e.get("values", []))
                      or e["operator"] == "Exists" for e in scoped)
        if matches and s.quantity(q["spec"]["hard"].get("pods", "0")) > 0:
            return True
    return False


def test_namespace_has_a_quota_for_its_node_critical_pods(pod: s.Pod) -> None:
    """Issue 45: system-node-critical outside kube-system with no ResourceQuota for it is
    refused where the ResourceQuota admission limits critical classes."""
    namespace = pod.daemonset["metadata"]["namespace"]
    assert namespace != "kube-system"
    assert _quota_admits(pod.docs, namespace, pod.spec["priorityClassName"])
    quota = s.one(pod.docs, "ResourceQuota")
    assert s.quantity(quota["spec"]["hard"]["pods"]) >= 2 * 5000, "2 per node, 5,000 nodes"
    # The check itself: another class, another namespace, or no quota are not admitted.
    assert not _quota_admits(pod.docs, namespace, "system-cluster-critical")
    assert not _quota_admits(pod.docs, "kube-system", pod.spec["priorityClassName"])
    assert not _quota_admits([d for d in pod.docs if d["kind"] != "ResourceQuota"], namespace,
                             pod.spec["priorityClassName"])


def test_rollout_replaces_one_node_at_a_time(pod: s.Pod) -> None:
    """Issue 45: production's `maxUnavailable: 10%` left a tenth of the nodes without their
    bridge (fail open) at once. One node at a time, no surge (two bridges on a node would
    both adjust every container), and the next only after this one stayed ready."""
    strategy = pod.daemonset["spec"]["updateStrategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    assert pod.daemonset["spec"]["minReadySeconds"] >= 10


def test_read_only_host_directories_are_recursively_read_only(pod: s.Pod) -> None:
    """Issue 45: `readOnly` covers the top mount only; below /run/containerd every
    container's root filesystem is mounted, writable to UID 0 without recursiveReadOnly."""
    host = {v["name"] for v in pod.spec["volumes"] if "hostPath" in v}
    checked = 0
    for c in pod.spec["containers"]:
        for m in c["volumeMounts"]:
            if m["name"] in host and m.get("readOnly"):
                assert m.get("recursiveReadOnly") in ("IfPossible", "Enabled"), (c["name"], m)
                assert m.get("mountPropagation", "None") == "None"
                checked += 1
    assert checked >= 3  # nri, cri, system-bus
    _, _, cri = s.volume_for(pod.spec, pod.bridge, pod.bridge_args.cri_socket)
    assert cri["recursiveReadOnly"] == "IfPossible", "containerd 1.7 nodes cannot do Enabled"


def test_node_effects_come_only_with_their_component() -> None:
    """Issue 45: the production overlay forced /sys/fs/resctrl, hostPID and two capabilities
    on every node (pods hang on nodes without RDT). They come with components/node-effects,
    together with rules that turn Resctrl and OOMScoreAdj on, and only with it."""
    for directory, components in COMBINATIONS:
        pod = s.Pod(s.render(s.combination(directory, components)))
        rules = s.koordinator_rules(pod.file(pod.policy, str(pod.policy_args.rules)))
        paths = [v["hostPath"]["path"] for v in pod.spec["volumes"] if "hostPath" in v]
        added = pod.policy["securityContext"]["capabilities"].get("add", [])
        on = NODE_EFFECTS in components
        where = (directory.name, [c.name for c in components])
        assert pod.spec.get("hostPID", False) is on, where
        assert ("/sys/fs/resctrl" in paths) is on, where
        assert sorted(added) == (["DAC_OVERRIDE", "SYS_RESOURCE"] if on else []), where
        assert rules.features.Resctrl is on and rules.features.OOMScoreAdj is on, where
        assert not rules.features.CoreSched, where


def test_node_effects_rules_are_the_production_rules_with_both_switches_on() -> None:
    production = yaml.safe_load((s.OVERLAYS[0] / "rules.yaml").read_text(encoding="utf-8"))
    component = yaml.safe_load((NODE_EFFECTS / "rules.yaml").read_text(encoding="utf-8"))
    assert component["features"]["Resctrl"] and component["features"]["OOMScoreAdj"]
    component["features"]["Resctrl"] = component["features"]["OOMScoreAdj"] = False
    assert component == production


def test_policy_server_user_is_the_one_docs_and_dockerfile_name(pod: s.Pod) -> None:
    """Issue 45: the Dockerfile said the policy server runs non-root, every manifest ran it as
    root. It is root where it writes the host's cgroup files (their owner), and both the
    Dockerfile and docs/deployment.md say so."""
    assert pod.policy_args.pod_cgroup_writes == "on"
    assert pod.policy["securityContext"]["runAsUser"] == 0
    dockerfile = s.DOCKERFILE.read_text(encoding="utf-8")
    assert "right for nri-policy-server" not in dockerfile
    assert "nri-policy-server runs as UID 0" in dockerfile
    assert "The **policy server runs as UID 0" in (
        s.REPO / "docs" / "deployment.md").read_text(encoding="utf-8")


def _metrics_port(pod: s.Pod, c: dict[str, Any], args: Any) -> dict[str, Any]:
    """The container port its --metrics-address listens on (all interfaces)."""
    host, _, port = args.metrics_address.rpartition(":")
    assert host == "0.0.0.0", f"{c['name']}: Prometheus scrapes the pod IP, not {host}"
    ports: list[dict[str, Any]] = [p for p in c["ports"] if p["containerPort"] == int(port)]
    [declared] = ports
    return declared


def test_metrics_listeners_are_declared_ports_behind_annotated_services(pod: s.Pod) -> None:
    services = {d["metadata"]["name"]: d for d in pod.docs if d["kind"] == "Service"}
    labels = pod.daemonset["spec"]["template"]["metadata"]["labels"]
    ports = [_metrics_port(pod, pod.bridge, pod.bridge_args),
             _metrics_port(pod, pod.policy, pod.policy_args)]
    names = [p["name"] for p in ports]
    assert len(set(names)) == 2, "port names are unique within a pod"
    served = []
    for svc in services.values():
        spec, notes = svc["spec"], svc["metadata"]["annotations"]
        assert spec["clusterIP"] == "None" and spec["publishNotReadyAddresses"] is True
        assert spec["selector"].items() <= labels.items(), "the Service selects the pod"
        [port] = spec["ports"]
        assert port["name"] == "metrics"
        [target] = [p for p in ports if p["name"] == port["targetPort"]]
        # The classic scrape config takes the port from the annotation, not the Service.
        assert notes["prometheus.io/scrape"] == "true"
        assert int(notes["prometheus.io/port"]) == target["containerPort"] == port["port"]
        assert notes["prometheus.io/path"] == "/metrics"
        served.append(target["name"])
    assert sorted(served) == sorted(names), "each program's metrics behind one Service"


def test_servicemonitor_component_selects_both_metrics_services(tmp_path: Path) -> None:
    directory = s.KUSTOMIZE / "components" / "servicemonitor"
    # An overlay as a user writes it (kustomize wants relative paths).
    base, component = (os.path.relpath(p, tmp_path) for p in (s.BASE, directory))
    (tmp_path / "kustomization.yaml").write_text(
        f"resources:\n  - {base}\ncomponents:\n  - {component}\n", encoding="utf-8")
    docs = s.render(tmp_path)
    monitor = s.one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    spec = monitor["spec"]
    services = [d for d in docs if d["kind"] == "Service"
                and spec["selector"]["matchLabels"].items() <= d["metadata"]["labels"].items()]
    assert len(services) == 2
    assert all(svc["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]
               for svc in services)
    [endpoint] = spec["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert all(endpoint["port"] in {p["name"] for p in svc["spec"]["ports"]}
               for svc in services)
    # Everything else the component adds to the base is still schema-valid core objects.
    errors = [e for d in docs if d["kind"] != "ServiceMonitor"
              for e in [s.schema_errors(d)] if e is not None]
    assert not errors, errors
