"""What `nri-webhook-bridge try` sends, compared field by field with what real containerd
(1.7.24 and 2.1.9) sends for the same manifest.

Pods are created through CRI as kubelet would create them: every value of the CRI configs
comes from the same translation `try` uses (bridge.kube). A bridge in `record` mode sits in
front of a policy and records the request bodies containerd's events produce; those are
compared with the bodies `try` builds for the same manifest. Every difference must be listed
in EXPECTED (with why); docs/try.md carries the same list.
"""

from __future__ import annotations

import json
import re
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.contract.convert import to_json
from bridge.kube import NodeSpec, container, load_pods, pod_sandbox, translate
from bridge.runtime_facts.profiles import PROFILES
from tests.waiting import wait_until

from .containerd import Containerd
from .cri import CriClient
from .kubelet_cri import Placement, container_config, sandbox_config
from .policy_proc import PolicyServer, WebhookBridge
from .private_containerd import REPO, keep_log
from .runtimes import BUSYBOX_IMAGE, PAUSE_IMAGE

pytestmark = pytest.mark.e2e

EVENTS = ["RunPodSandbox", "CreateContainer"]
WAIT_S = 30.0
# The e2e machine has no CNI: pods use the host network.
MANIFEST = f"""\
kind: Pod
metadata:
  name: compare
  namespace: e2e
  uid: 7c0a0000-0000-4000-8000-00000000e2e1
  labels: {{app: compare, example.com/team: e2e}}
  annotations: {{example.com/note: compared}}
spec:
  hostNetwork: true
  initContainers:
    - name: setup
      image: {BUSYBOX_IMAGE}
      command: [/bin/true]
      resources: {{requests: {{cpu: 100m, memory: 32Mi}}, limits: {{memory: 64Mi}}}}
  containers:
    - name: app
      image: {BUSYBOX_IMAGE}
      command: [/bin/sh, -c, "exec sleep 3600"]
      env:
        - {{name: MODE, value: compare}}
        - {{name: POD, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
      ports: [{{name: http, containerPort: 8080}}]
      resources:
        requests: {{cpu: 250m, memory: 64Mi}}
        limits: {{cpu: 1500m, memory: 128Mi}}
      volumeMounts:
        - {{name: scratch, mountPath: /scratch}}
        - {{name: conf, mountPath: /etc/conf, readOnly: true}}
  volumes:
    - {{name: scratch, emptyDir: {{}}}}
    - {{name: conf, configMap: {{name: conf}}}}
"""

# Field paths (regular expressions; "container" stands for any container) where try's value
# may differ from containerd's, and why. docs/try.md ("Checked against a real runtime")
# carries the same list. Any other difference fails the test.
EXPECTED: dict[str, str] = {
    r"pod: pid": "the pause process's pid (try: a stand-in from 4000)",
    r"container: env\[0\]": "the image's own ENV (here PATH=/bin); try has no image and "
                            "uses containerd's default PATH",
    r"container: linux\.resources\.hugepage_limits(\[\d+\]\.\w+)?":
        "this machine's cgroup v1 has no hugetlb controller, so containerd drops every "
        "hugepage limit (tolerate_missing_hugetlb_controller, its default); try assumes a "
        "node that has it",
    r"container: linux\.resources\.unified\.memory\.swap\.max":
        "cgroup v2 only: kubelet sends NoSwap as unified memory.swap.max = 0 (try shows what "
        "kubelet sends, and this test sends it over CRI), but containerd 2.1.9 does not pass "
        "it on to NRI plugins (seen on the v2 node of `make node-v2`)",
}


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out if value else {prefix: []}
    return {prefix: value}


class RecordingBridge(WebhookBridge):
    """The webhook bridge in `record` mode: every request body goes to a JSONL file."""

    def __init__(self, nri_socket: Path, workdir: Path, webhooks: list[dict[str, Any]]) -> None:
        super().__init__(nri_socket, workdir, webhooks)
        self.recording = workdir / "events.jsonl"

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("run")] = "record"
        return [*cmd, "--output", str(self.recording)]

    def requests(self) -> list[dict[str, Any]]:
        if not self.recording.exists():
            return []
        lines = [json.loads(line)["request"]
                 for line in self.recording.read_text().splitlines() if line.strip()]
        return [r for r in lines if r.get("event") in EVENTS]


def wait_requests(bridge: RecordingBridge, count: int) -> list[dict[str, Any]]:
    # The recorder writes a file; there is no event to wait on.
    def enough() -> list[dict[str, Any]] | None:
        got = bridge.requests()
        return got if len(got) >= count else None
    return wait_until(enough, what=f"{count} recorded events", timeout_s=WAIT_S,
                      details=lambda: f"{len(bridge.requests())} recorded\n{bridge.tail()}")


def test_try_sends_what_containerd_sends(containerd: Containerd, clean_pods: CriClient,
                                         request: pytest.FixtureRequest) -> None:
    node = NodeSpec(cgroup_driver="cgroupfs", name=socket.gethostname(),
                    cgroup_version=2 if Path("/sys/fs/cgroup/cgroup.controllers").exists() else 1)
    compare_with_runtime(containerd, clean_pods, request, node)


def compare_with_runtime(containerd: Containerd, cri: CriClient, request: pytest.FixtureRequest,
                         node: NodeSpec, make_pod_cgroup: Callable[[str], None] | None = None,
                         ) -> None:
    """Play MANIFEST through real containerd and through `try` on ``node``; fail on any
    difference not in EXPECTED. ``make_pod_cgroup(parent)`` does what kubelet does before
    RunPodSandbox (the systemd driver: the pod's slice)."""
    pb = cri.pb
    base = Path(tempfile.mkdtemp(prefix="try-", dir=containerd.dirs.base))
    manifest = base / "pod.yaml"
    manifest.write_text(MANIFEST)
    version = containerd.runtime.version
    profile = PROFILES[f"containerd-{version}"]
    (pod,) = load_pods([str(manifest)])
    cri_pod = translate(pod, node)
    policy = PolicyServer(base / "policy",
                          policy_modules=(REPO / "examples" / "label_env_policy.py",),
                          koordinator=False)
    bridge = RecordingBridge(containerd.dirs.nri_socket, base / "bridge", [
        {"name": "label-env", "events": EVENTS,
         "url": f"unix://{policy.socket}/v1/policies/label-env"}])
    where = Placement(base, containerd.dirs.root, containerd.dirs.state)
    try:
        policy.start()
        policy.wait_healthy()
        bridge.start()
        bridge.wait_ready()
        sandbox_cfg = sandbox_config(pb, cri_pod, where)
        if make_pod_cgroup is not None:
            make_pod_cgroup(sandbox_cfg.linux.cgroup_parent)
        sandbox_id = cri.runtime.RunPodSandbox(pb.RunPodSandboxRequest(config=sandbox_cfg),
                                               timeout=60).pod_sandbox_id
        ids = []
        for c in cri_pod.containers:
            reply = cri.runtime.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=sandbox_id, config=container_config(pb, cri_pod, c, sandbox_cfg,
                                                                   where),
                sandbox_config=sandbox_cfg), timeout=60)
            ids.append(reply.container_id)
        recorded = wait_requests(bridge, 1 + len(ids))
    finally:
        bridge.stop()
        policy.stop()
        name = request.node.name.replace("/", "_")
        keep_log(bridge.log, f"{name}-bridge.log")
    real_pod = recorded[0]["pod"]
    sandbox = pod_sandbox(cri_pod, profile)
    ours_pod = to_json(sandbox)
    differences = compare("pod", ours_pod, real_pod, where, {
        sandbox.id: real_pod["id"], str(sandbox.pid): str(real_pod.get("pid", ""))})
    for c, cid, body in zip(cri_pod.containers, ids, recorded[1:], strict=True):
        ours = to_json(container(cri_pod, c, sandbox, profile))
        differences += compare("container", ours, body["container"], where,
                               {ours["id"]: cid, sandbox.id: real_pod["id"],
                                f"/proc/{sandbox.pid}/": f"/proc/{real_pod.get('pid')}/"})
    unexplained = [d for d in differences
                   if not any(re.fullmatch(p, d[0]) for p in EXPECTED)]
    report = "\n".join(f"{where_}: try={ours!r} containerd={real!r}"
                       for where_, ours, real in differences)
    print(f"containerd {version}, differences:\n{report}")
    assert not unexplained, "\n".join(f"{p}: try={o!r} containerd={r!r}"
                                      for p, o, r in unexplained)


def compare(label: str, ours: dict[str, Any], real: dict[str, Any], where: Placement,
            ids: dict[str, str]) -> list[tuple[str, Any, Any]]:
    def norm(value: Any) -> Any:
        if isinstance(value, str):
            for ours_id, real_id in ids.items():
                value = value.replace(real_id, ours_id) if real_id else value
            value = where.back(value)
            return value.replace(PAUSE_IMAGE, "<pause image>")
        return value

    # The pause image is the runtime's configuration (sandbox_image), not a translated value.
    mine = {k: "<pause image>" if k.endswith("podsandbox.image-name") else v
            for k, v in flatten(ours).items()}
    theirs = {norm(k): norm(v) for k, v in flatten(real).items()}
    out = []
    for path in sorted(set(mine) | set(theirs)):
        if mine.get(path) != theirs.get(path):
            out.append((f"{label}: {path}", mine.get(path), theirs.get(path)))
    return out
