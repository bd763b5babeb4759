"""The kustomize base and overlays: they render, validate, and agree with the CLIs.

Every check runs on what `kubectl kustomize` renders for the base and for each
overlay, so an overlay that patches the bridge's arguments is held to the same
rules; every rendered object is checked against the Kubernetes OpenAPI schema of
that kubectl's version.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from typing import Any

import pytest

from bridge.cri.runtime_service import DEFAULT_SOCKETS, default_socket
from bridge.transport import connect
from tests.deploy import support as s

pytestmark = pytest.mark.processes  # starts processes: not in make check

VARIANTS = [s.BASE, *s.OVERLAYS]
IDS = [p.name for p in VARIANTS]
NAMESPACE = "nri-webhook-bridge"
CRI_O = s.KUSTOMIZE / "components" / "cri-o"
CRI_DIRECTORIES = {posixpath.dirname(p) for p in DEFAULT_SOCKETS.values()}


@pytest.fixture(params=VARIANTS, ids=IDS)
def pod(request: pytest.FixtureRequest) -> s.Pod:
    return s.Pod(s.render(request.param))


def test_every_yaml_file_parses() -> None:
    files = s.yaml_files()
    assert len(files) >= 10
    for path in files:
        docs = s.load_docs(path)
        assert docs, f"{path} is empty"
        for doc in docs:
            assert isinstance(doc, dict), f"{path}: a document is not a mapping"


@pytest.mark.parametrize("directory", [s.BASE, *s.OVERLAYS], ids=IDS)
def test_kustomization_references_exist(directory: Path) -> None:
    k = s.kustomization(directory)
    referenced = [*k.get("resources", []), *(p["path"] for p in k.get("patches", []))]
    referenced += [entry.partition("=")[2] or entry
                   for gen in k.get("configMapGenerator", []) for entry in gen.get("files", [])]
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


@pytest.mark.parametrize("directory", VARIANTS, ids=IDS)
def test_rendered_objects_match_the_kubernetes_schema(directory: Path) -> None:
    docs = s.render(directory)
    assert docs
    errors = [e for e in map(s.schema_errors, docs) if e is not None]
    assert not errors, "\n".join(errors)


def test_schema_check_catches_a_misspelt_field() -> None:
    pod = s.Pod(s.render(s.BASE))
    assert s.schema_errors(pod.daemonset) is None
    pod.bridge["readOnlyRootFileSystem"] = pod.bridge["securityContext"].pop(
        "readOnlyRootFilesystem")
    error = s.schema_errors(pod.daemonset)
    assert error is not None and "readOnlyRootFileSystem" in error


def test_manifests_are_namespaced_objects_with_names(pod: s.Pod) -> None:
    kinds = sorted(d["kind"] for d in pod.docs)
    assert kinds == ["ConfigMap", "ConfigMap", "DaemonSet", "Namespace", "Service", "Service",
                     "ServiceAccount"]
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


def test_daemonset_runs_on_every_node_as_node_critical(pod: s.Pod) -> None:
    ds = pod.daemonset
    assert ds["spec"]["selector"]["matchLabels"].items() <= (
        ds["spec"]["template"]["metadata"]["labels"].items())
    assert pod.spec["priorityClassName"] == "system-node-critical"
    # One toleration that matches every taint: operator Exists, no key, no effect.
    assert {"operator": "Exists"} in pod.spec["tolerations"]
    assert not pod.spec.get("hostNetwork", False)
    # The node's PIDs only where the rules keep running processes' OOM scores or core-sched
    # cookies (the production overlay), not in the base.
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
    _cri_socket_directory_is_mounted(pod, "containerd")


@pytest.mark.parametrize("directory", VARIANTS, ids=IDS)
def test_cri_o_component_mounts_and_dials_cri_os_socket(directory: Path, tmp_path: Path) -> None:
    # As docs/deployment.md says to use it: last, in an overlay of its own on top of the base
    # or of an overlay.
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [{os.path.relpath(directory, tmp_path)}]\n"
        f"components: [{os.path.relpath(CRI_O, tmp_path)}]\n")
    docs = s.render(tmp_path)
    pod = s.Pod(docs)
    _cri_socket_directory_is_mounted(pod, "cri-o")
    errors = [e for e in map(s.schema_errors, docs) if e is not None]
    assert not errors, "\n".join(errors)
    # Nothing else changes.
    plain = s.Pod(s.render(directory))
    for c in (pod.bridge, plain.bridge):
        c["args"] = [a for a in c["args"] if not a.startswith("--cri-socket=")]
        c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "cri"]
    for p in (pod, plain):
        p.spec["volumes"] = sorted((v for v in p.spec["volumes"] if v["name"] != "cri"),
                                   key=lambda v: v["name"])
    assert pod.docs == plain.docs


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


def test_production_overlay_pins_the_image_and_logs_json() -> None:
    pod = s.Pod(s.render(s.OVERLAYS[0]))
    base = s.Pod(s.render(s.BASE))
    for c in (pod.bridge, pod.policy):
        name, _, tag = c["image"].rpartition(":")
        assert tag and tag != "latest" and "/" in name
    assert pod.bridge_args.log_format == pod.policy_args.log_format == "json"
    assert base.bridge_args.log_format == base.policy_args.log_format == "text"
    assert s.koordinator_rules(pod.file(pod.policy, str(pod.policy_args.rules))) != (
        s.koordinator_rules(base.file(base.policy, str(base.policy_args.rules))))
    # Apart from the log format (and the resctrl tree its Resctrl rule needs), the overlay
    # repeats the base's arguments.
    for c, b in ((pod.bridge, base.bridge), (pod.policy, base.policy)):
        differing = set(c["args"]) ^ set(b["args"])
        extra = {"--resctrl-root=/host/sys/fs/resctrl"} if c is pod.policy else set()
        assert differing == {"--log-format=json", "--log-format=text", *extra}, c["name"]


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
