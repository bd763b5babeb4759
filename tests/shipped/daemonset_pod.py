"""The rendered DaemonSet's pod running on one containerd, and the checks every node runs on it.

Owns: starting the pod of the rendered objects with a given kubelet (the image imported under
the references the manifests name, readiness probes run until they pass), what the tests read
from it (container logs, koordinator-qos's rules from the rendered ConfigMap), and the checks
shared by `make shipped` (cgroup v1, cgroupfs) and `make node-v2` (cgroup v2, systemd): the
declared security context, the liveness probes, the bridge's registration, a container update
posted to the bridge reaching a running container through the runtime's CRI socket, the
containerd restart under the running pod.

Must not: change what the manifests declare, or build the image (image.py does).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policy_server.policies.koordinator_qos import Rules, rules_from_yaml
from tests.deploy.support import Pod
from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient
from tests.e2e.inspect_proc import cgroup_values
from tests.e2e.private_containerd import wait_serving
from tests.e2e.procs import scaled
from tests.waiting import wait_until

from .image import BuiltImage, import_as
from .kubelet import Kubelet, RunningPod
from .security_context import assert_is, identity, read_proc

READY_TIMEOUT_S = 60.0
UPDATE_TIMEOUT_S = 40  # the bridge answers a POST /v1/updates within 35 s (its send bound)
CRI_ROUTE_LOG = "updates go through CRI UpdateContainerResources"
# containerd's log line for a plugin's NRI UpdateContainers (the call that can deadlock it).
NRI_UPDATES_LOG = "requested container updates"
PLUGIN_ID = "50-webhook-bridge"
RULES_CONFIGMAP = "nri-policy-server-rules"


@dataclass
class DaemonSetPod:
    overlay: Path
    containerd: Containerd
    cri: CriClient
    kubelet: Kubelet
    pod: RunningPod
    spec: dict[str, Any]
    docs: list[dict[str, Any]]

    def rules(self) -> Rules:
        """koordinator-qos's rules as the rendered ConfigMap gives them to the policy server."""
        cm = next(d for d in self.docs
                  if d["kind"] == "ConfigMap" and d["metadata"]["name"] == RULES_CONFIGMAP)
        return rules_from_yaml(cm["data"]["rules.yaml"])

    def logs(self) -> str:
        return "\n".join(
            f"--- {name}:\n"
            + "\n".join(self.kubelet.container_log(self.pod, name).splitlines()[-30:])
            for name in self.pod.containers
        )

    def log(self, container: str) -> str:
        return self.kubelet.container_log(self.pod, container)

    def wait_ready(self) -> dict[str, int]:
        return self.kubelet.wait_ready(self.pod, self.spec, scaled(READY_TIMEOUT_S), self.logs)

    def registered_needle(self) -> str:
        """containerd's log line for this pod's bridge process registering over NRI."""
        pid = self.cri.container_pid(self.pod.containers["bridge"])
        return f'external:{PLUGIN_ID}[{pid}]\\" registered'


def fake_resctrl(base: Path) -> Path:
    """A node without RDT: a resctrl-shaped directory for the production overlay's hostPath."""
    resctrl = base / "resctrl"
    (resctrl / "info" / "L3").mkdir(parents=True, exist_ok=True)
    (resctrl / "info" / "L3" / "cbm_mask").write_text("7ff\n")
    (resctrl / "schemata").write_text("L3:0=7ff\n")
    return resctrl


@contextmanager
def running(overlay: Path, docs: list[dict[str, Any]], containerd: Containerd, cri: CriClient,
            kubelet: Kubelet, image: BuiltImage) -> Iterator[DaemonSetPod]:
    """The DaemonSet's pod from ``docs`` (rendered from ``overlay``), ready; every pod of the
    containerd removed afterwards."""
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    refs = sorted({c["image"] for c in spec["containers"]})
    start = time.monotonic()
    import_as(containerd, image, refs)
    kubelet.notes.append(f"image imported in {time.monotonic() - start:.0f} s")
    try:
        wait_serving(cri, *refs)
        start = time.monotonic()
        pod = kubelet.run(docs)
        ds_pod = DaemonSetPod(overlay, containerd, cri, kubelet, pod, spec, docs)
        runs = ds_pod.wait_ready()
        kubelet.notes.append(f"pod created and ready in {time.monotonic() - start:.0f} s")
        print(
            f"\ncontainerd {containerd.runtime.version}, {overlay.name}: DaemonSet pod ready "
            f"(readiness probe runs: {runs})" + "".join(f"\n  note: {n}" for n in kubelet.notes)
        )
        yield ds_pod
    finally:
        try:
            if containerd.running():
                cri.remove_all()
        finally:
            kubelet.unmount_volumes()


# --- checks every node runs --------------------------------------------------------------


def check_security_context(ds: DaemonSetPod) -> None:
    """Each container runs with exactly its declared identity, no_new_privs, the
    RuntimeDefault seccomp filter, and the declared read-only root."""
    for c in ds.spec["containers"]:
        pid = ds.cri.container_pid(ds.pod.containers[c["name"]])
        assert_is(pid, identity(ds.spec, c))
        assert read_proc(pid).no_new_privs
        status = dict(
            line.split(":\t", 1)
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if ":\t" in line
        )
        assert status["Seccomp"].strip() == "2", f"{c['name']}: no seccomp filter"  # RuntimeDefault
        root = next(
            line.split()
            for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
            if line.split()[4] == "/"
        )
        assert ("ro" in root[5].split(",")) is c["securityContext"]["readOnlyRootFilesystem"]
        code, out = ds.cri.exec_sync(ds.pod.containers[c["name"]],
                                     ["sh", "-c", "touch /probe-write"])  # fmt: skip
        assert code != 0 and "Read-only file system" in out, out


def check_liveness_probes(ds: DaemonSetPod) -> None:
    for c in ds.spec["containers"]:
        code, out = ds.kubelet.probe(ds.pod.containers[c["name"]], c["livenessProbe"])
        assert code == 0, f"{c['name']} liveness: exit {code}: {out}"


def check_registered(ds: DaemonSetPod) -> None:
    assert ds.registered_needle() in ds.containerd.log_text(), ds.logs()


def post_update(ds: DaemonSetPod, update: dict[str, Any]) -> dict[str, Any]:
    """POST /v1/updates on the bridge's control socket from inside the bridge container (the
    socket the policy server pushes to, as the manifests name it); the bridge's answer."""
    control = Pod(ds.docs).bridge_args.control_socket
    timeout_s = math.ceil(scaled(UPDATE_TIMEOUT_S))
    code, out = ds.cri.exec_sync(
        ds.pod.containers["bridge"],
        ["curl", "--fail-with-body", "--silent", "--show-error", "--max-time", str(timeout_s),
         "--unix-socket", control, "--header", "content-type: application/json",
         "--data", json.dumps({"update": [update]}), "http://bridge/v1/updates"],
        timeout_s=timeout_s + 5)  # fmt: skip
    assert code == 0, f"POST /v1/updates: exit {code}: {out}\n{ds.logs()}"
    answer: dict[str, Any] = json.loads(out)
    return answer


def check_update_reaches_a_running_container(ds: DaemonSetPod, name: str) -> None:
    """An update posted to the bridge (as the policy server pushes rule changes and repairs)
    changes a running container through the runtime's CRI socket, which the pod mounts from
    the node: containerd 1.7.24 and 2.1.9 can deadlock on NRI UpdateContainers
    (containerd/containerd#13733), so not one of those reaches containerd."""
    cri = ds.cri
    pod = cri.run_pod(name, cgroup_prefix=ds.kubelet.cgroup_prefix)  # where the node's pods go
    cid = cri.run_container(pod)
    offset = ds.containerd.log_size()
    answer = post_update(ds, {"container_id": cid,
                              "linux": {"resources": {"cpu": {"cpus": "0"}}}})
    assert answer == {"failed": []}, (answer, ds.logs())
    assert cgroup_values(cri.container_pid(cid)).cpuset_cpus == "0", ds.logs()
    assert CRI_ROUTE_LOG in ds.log("bridge"), ds.logs()
    assert NRI_UPDATES_LOG not in ds.containerd.log_since(offset)
    cri.stop_pod(pod.id)
    cri.remove_pod(pod.id)


def restart_containerd_under_the_pod(ds: DaemonSetPod) -> None:
    """containerd restarts; the same bridge process registers again (its directory mount
    sees the new socket) and the pod is ready again."""
    containerd = ds.containerd
    bridge_pid = ds.cri.container_pid(ds.pod.containers["bridge"])
    needle = ds.registered_needle()
    offset = containerd.log_size()
    containerd.restart()
    ds.cri.wait_ready()
    wait_until(lambda: needle in containerd.log_since(offset), what="the bridge registers again",
               timeout_s=scaled(READY_TIMEOUT_S), interval_s=0.1, details=ds.logs)
    assert ds.cri.container_pid(ds.pod.containers["bridge"]) == bridge_pid
    ds.wait_ready()
