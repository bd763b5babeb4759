"""`nri-webhook-bridge try` end to end: real processes (policy server, the bridge), the
runtime simulator, README's example pods against koordinator-qos and a user's policy."""

from __future__ import annotations

import json
import socket
import urllib.parse
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing

from .conftest import REPO, bridge_config, run_try

pytestmark = pytest.mark.processes  # starts processes: not in make check

SCHEMAS = REPO / "schemas"
EXAMPLE_PODS = sorted(str(p) for p in (REPO / "examples" / "pods").glob("*.yaml"))


def validate(objects: Any) -> None:
    """Against schemas/try/output.schema.json, its references resolved from the files alone."""

    def retrieve(uri: str) -> referencing.Resource[Any]:
        path = Path(urllib.parse.urlparse(uri).path)
        return referencing.Resource.from_contents(json.loads(path.read_text()))

    path = SCHEMAS / "try" / "output.schema.json"
    schema = {**json.loads(path.read_text()), "$id": path.as_uri()}
    # `retrieve` is referencing's documented argument (attrs' alias of the field `_retrieve`),
    # which its dataclass_transform stub does not carry over: a gap in the library's types.
    registry: referencing.Registry[Any] = referencing.Registry(
        retrieve=retrieve)  # type: ignore[call-arg]
    jsonschema.Draft202012Validator(schema, registry=registry).validate(objects)


def by_container(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["pod"], o["container"]): o for o in objects}


def test_readme_example_json(tmp_path: Path, policy_socket: Path) -> None:
    config = bridge_config(tmp_path, policy_socket)
    done = run_try(*EXAMPLE_PODS, "--config", str(config), "--output", "json")
    assert done.returncode == 0, done.stderr
    objects = json.loads(done.stdout)
    validate(objects)
    got = by_container(objects)
    # The LSR pod: pinned to the CPUs koord-scheduler reserved, no CFS quota.
    lsr = got[("shop/latency-critical", "app")]
    assert lsr["qos_class"] == "Guaranteed"
    assert lsr["requests"]["CreateContainer"]["container"]["linux"]["resources"]["cpu"] == {
        "shares": 2048, "quota": 200000, "period": 100000}
    assert lsr["adjust"]["koordinator-qos"]["linux"]["resources"]["cpu"]["cpus"] == "2-3"
    assert lsr["effective"]["resources"]["cpu"]["cpus"] == "2-3"
    assert lsr["effective"]["oom_score_adj"] == -997
    assert "TEAM=payments" in lsr["effective"]["env"]  # the user's policy
    # The BE job: BestEffort for kubelet, batch resources applied by koordinator-qos.
    be = next(o for (pod, _), o in got.items() if pod.startswith("analytics/nightly-report-"))
    assert be["qos_class"] == "BestEffort"
    assert be["requests"]["CreateContainer"]["container"]["linux"]["resources"]["cpu"] == {
        "shares": 2, "period": 100000}
    batch = be["effective"]["resources"]
    assert batch["cpu"]["shares"] == 1024  # 1000 milli batch-cpu
    assert batch["memory"]["limit"] == 2 << 30
    # The Deployment: init, sidecar, container in kubelet's order; warnings from label-env.
    web = [o for o in objects if o["pod"].startswith("shop/web-")]
    assert [(o["container"], o["kind"]) for o in web] == [
        ("migrate", "init"), ("proxy", "sidecar"), ("web", "container")]
    assert all(any(w["webhook"] == "label-env" for w in o["warnings"]) for o in web)
    assert set(web[0]["requests"]) >= {"RunPodSandbox", "CreateContainer"}
    assert all(o["reject"] is None for o in objects)


def test_table_output(tmp_path: Path, policy_socket: Path) -> None:
    config = bridge_config(tmp_path, policy_socket)
    done = run_try(EXAMPLE_PODS[1], "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert "pod shop/latency-critical  (Guaranteed, cgroup parent /kubepods/pod" in done.stdout
    assert "koordinator-qos: adjust cpuset=2-3" in done.stdout
    assert "label-env: adjust env TEAM=payments" in done.stdout
    assert "effective: cpuset=2-3 shares=2048" in done.stdout


REJECTED_POD = """\
kind: Pod
metadata: {name: risky, namespace: dev}
spec:
  initContainers:
    - {name: setup, image: "tools:latest"}
  containers:
    - {name: app, image: "app:1.0"}
"""


def test_reject_exits_1_and_stops_kubelet_order(policy_socket: Path) -> None:
    url = f"unix://{policy_socket}/v1/policies/no-latest"
    done = run_try("-", "--policy-url", url, "--output", "json", "--cgroup-driver", "systemd",
                   stdin=REJECTED_POD)
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""  # the reject is in the output, not also a log line on stderr
    objects = json.loads(done.stdout)
    validate(objects)
    setup, app = objects
    assert setup["reject"] == {"webhook": "policy", "event": "CreateContainer",
                               "reason": "no_latest: image tools:latest uses :latest"}
    assert setup["effective"] is None
    # kubelet never gets past a failed init container: the app is not created.
    assert app["reject"] is None and app["effective"] is None
    assert "CreateContainer" not in app["requests"]
    assert any("not started: init container setup" in w["message"] for w in app["warnings"])
    assert setup["cgroup_parent"].startswith(
        "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod")


def test_list_from_stdin_with_profile(policy_socket: Path) -> None:
    url = f"unix://{policy_socket}/v1/policies/no-latest"
    manifests = (Path(__file__).resolve().parents[1] / "kube" / "manifests" /
                 "kubectl-get-list.yaml").read_text()
    done = run_try("-", "--policy-url", url, "--output", "json",
                   "--profile", "containerd-1.7.24", "--cgroup-version", "1",
                   "--node-memory", "16Gi", stdin=manifests)
    assert done.returncode == 0, done.stderr
    objects = json.loads(done.stdout)
    assert [o["pod"] for o in objects] == ["default/api-7d4b9c8f5d-x2x7k", "default/cache-0",
                                           f"kube-system/{objects[2]['pod'].split('/')[1]}"]
    api = objects[0]
    create = api["requests"]["CreateContainer"]
    assert create["runtime"]["version"] == "1.7.24~ds1"
    assert create["container"]["linux"]["oom_score_adj"] == 1000 - (1000 * 128) // (16 * 1024)
    assert [w["message"] for w in api["warnings"]] == ["checked api:1"]


@pytest.mark.parametrize(("manifest", "message"), [
    ("metadata: {name: s}\n", "<stdin> document 2: kind: missing"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, resources: "
     "{limits: {cpu: lots}}}]}\n", "spec.containers[0] (c).resources.limits.cpu: expected a"),
    ("kind: Pod\nspec: {containers: [{name: c, image: i}]}\n", "metadata.name: missing"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n",
     "<stdin> document 2 (Pod p): spec.containers[0] (c).image: missing"),
])
def test_bad_manifest_exits_2_and_sends_nothing(tmp_path: Path, manifest: str,
                                                message: str) -> None:
    # A listener that would see any connection attempt in its backlog.
    sock_path = tmp_path / "policy.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.listen(8)
    listener.setblocking(False)
    try:
        good = "kind: Pod\nmetadata: {name: ok}\nspec: {containers: [{name: c, image: i}]}\n"
        done = run_try("-", "--policy-url", f"unix://{sock_path}/v1/policies/x",
                       stdin=good + "---\n" + manifest)
        assert done.returncode == 2
        assert message in done.stderr
        assert done.stdout == ""
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    finally:
        listener.close()


@pytest.mark.parametrize("args", [
    ["--node-memory", "lots"], ["--node-cpus", "0"], ["--node-labels", "novalue"],
])
def test_bad_options_exit_2(policy_socket: Path, args: list[str]) -> None:
    url = f"unix://{policy_socket}/v1/policies/no-latest"
    done = run_try(EXAMPLE_PODS[0], "--policy-url", url, *args)
    assert done.returncode == 2
    assert args[0] in done.stderr


def test_bad_config_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text("webhooks:\n  - name: x\n    url: unix:///tmp/x.sock/p\n    bogus: 1\n")
    done = run_try(EXAMPLE_PODS[0], "--config", str(config))
    assert done.returncode == 2
    assert "webhooks[0].bogus: unknown key" in done.stderr


@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
def test_unreachable_webhook_exits_3_whatever_its_failure_policy(tmp_path: Path,
                                                                 policy: str) -> None:
    """Issue 25: an unreachable policy gave warnings and exit 0 (Ignore); under Fail the reject
    said "HTTP 502", the relay's answer, instead of why the call failed."""
    config = tmp_path / "bridge.yaml"
    config.write_text(json.dumps({"webhooks": [{
        "name": "gone", "url": f"unix://{tmp_path}/nobody.sock/v1/policies/x",
        "events": ["CreateContainer"], "failure_policy": policy}]}))
    done = run_try(EXAMPLE_PODS[1], "--config", str(config), "--output", "json")
    assert done.returncode == 3, done.stderr
    (app,) = json.loads(done.stdout)
    assert any(w["webhook"] == "gone" and w["event"] == "CreateContainer"
               and w["message"].startswith("call failed: connect_error: cannot connect")
               for w in app["warnings"])
    assert done.stderr.splitlines() == [
        "nri-webhook-bridge try: call failed: gone (CreateContainer, pod shop/latency-critical, "
        f"container app): connect_error: cannot connect to unix://{tmp_path}/nobody.sock/v1/"
        "policies/x: [Errno 2] No such file or directory",
        "nri-webhook-bridge try: 1 webhook call(s) failed"]
    if policy == "Fail":
        assert app["reject"]["event"] == "CreateContainer"
        assert app["reject"]["reason"].startswith(
            'webhook "gone" failed: connect_error: cannot connect')
        assert "502" not in app["reject"]["reason"]
        assert app["effective"] is None
    else:
        assert app["reject"] is None and app["effective"]["oom_score_adj"] == -997


def test_shadow_mode_reject_is_a_warning(tmp_path: Path, policy_socket: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(json.dumps({"webhooks": [{
        "name": "no-latest", "url": f"unix://{policy_socket}/v1/policies/no-latest",
        "events": ["CreateContainer"], "mode": "shadow"}]}))
    done = run_try("-", "--config", str(config), "--output", "json", stdin=REJECTED_POD)
    assert done.returncode == 0, done.stderr
    setup, app = json.loads(done.stdout)
    assert setup["reject"] is None and setup["requests"]["CreateContainer"]["dry_run"] is True
    assert [w["message"] for w in setup["warnings"]] == [
        "shadow mode: would reject: no_latest: image tools:latest uses :latest"]
    assert app["effective"] is not None  # kubelet got past the init container


def test_no_pods_is_bad_input(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("---\n# nothing\n")
    done = run_try(str(empty), "--policy-url", "unix:///tmp/x.sock/p")
    assert done.returncode == 2
    assert "the manifests describe no pods" in done.stderr
