"""Issue 43.2 and 43.3: the reconciler trusts only its bridge; node writes stay beneath kubepods.

Every test runs the real ``nri-policy-server`` process as root with node effects on against a
fake node in a temporary directory: a cgroup v2 tree with kubelet's own cgroup
(``system.slice/kubelet.service``: ``memory.max``, ``cpu.weight``, its ``cgroup.procs``), a
kubepods tree, a fake proc root with ``oom_score_adj`` files and no D-Bus
(``--systemd-properties off``). A forged ``/v1/state`` is served by the attacker uid
(tests/security/attacker.py) on a Unix socket it owns, or on a TCP port.
"""

from __future__ import annotations

import http.server
import json
import os
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.policy_server.factory import batch_spec, envelope, pod
from tests.security.attacker import PYTHON, Attacker
from tests.waiting import healthz, wait_until

pytestmark = pytest.mark.processes  # starts processes: not in make check

BIN = Path(sys.executable).parent
KUBELET = "system.slice/kubelet.service"
KUBELET_CHILD = f"{KUBELET}/besteffort"
KUBELET_PID = 4242
POD_PID = 4343
POD_UID = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"
BE_SLICE = f"kubepods-besteffort-pod{POD_UID.replace('-', '_')}.slice"
BE_DIR = f"kubepods.slice/kubepods-besteffort.slice/{BE_SLICE}"
SCOPE = "cri-containerd-c1.scope"
FULL = {"requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "2Gi"},
        "limits": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "2Gi"}}
ORIGINAL = {"memory.max": "max", "cpu.weight": "100", "cpu.max": "max 100000"}
STARTUP_TIMEOUT_S = 60.0
PASSES_TIMEOUT_S = 60.0


@dataclass
class FakeNode:
    root: Path  # cgroup v2
    proc: Path
    resctrl: Path
    rules: Path

    def kubelet_files(self, rel: str = KUBELET) -> dict[str, str]:
        return {n: (self.root / rel / n).read_text().strip() for n in ORIGINAL}

    def oom(self, pid: int) -> str:
        return (self.proc / str(pid) / "oom_score_adj").read_text().strip()

    def args(self) -> list[str]:
        return ["--cgroup-root", str(self.root), "--cgroup-version", "2",
                "--proc-root", str(self.proc), "--resctrl-root", str(self.resctrl),
                "--systemd-properties", "off", "--pod-cgroup-writes", "on",
                "--rules", str(self.rules)]


def fake_node(base: Path) -> FakeNode:
    root, proc = base / "cgroup", base / "proc"
    (root / KUBELET).mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory cpuset\n")
    for name, value in ORIGINAL.items():
        (root / KUBELET / name).write_text(value + "\n")
    (root / KUBELET / "cgroup.procs").write_text(f"{KUBELET_PID}\n")
    # A child cgroup of kubelet's whose name koordinator-qos reads as kube-BestEffort.
    (root / KUBELET_CHILD).mkdir()
    for name, value in ORIGINAL.items():
        (root / KUBELET_CHILD / name).write_text(value + "\n")
    pod_dir = root / BE_DIR
    (pod_dir / SCOPE).mkdir(parents=True)
    for name, value in ORIGINAL.items():
        (pod_dir / name).write_text(value + "\n")
    (pod_dir / SCOPE / "cgroup.procs").write_text(f"{POD_PID}\n")
    for pid in (KUBELET_PID, POD_PID):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "oom_score_adj").write_text("0\n")
    (proc / "sys" / "kernel").mkdir(parents=True)
    resctrl = base / "resctrl"
    resctrl.mkdir()
    rules = base / "rules.yaml"
    rules.write_text("features:\n  OOMScoreAdj: true\n  BatchResource: true\n")
    return FakeNode(root, proc, resctrl, rules)


@contextmanager
def policy_server(work: Path, *args: str) -> Iterator[tuple[Path, subprocess.Popen[bytes], Path]]:
    sock, log = work / "policy.sock", work / "policy.log"
    argv = [str(BIN / "nri-policy-server"), "--uds", str(sock), "--log-level", "info", *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"policy server exited {proc.returncode}:\n{log.read_text()}")
            return healthz(sock)()
        wait_until(healthy, what="policy server /healthz", timeout_s=STARTUP_TIMEOUT_S,
                   interval_s=0.1, details=log.read_text)
        yield sock, proc, log
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def post(sock: Path, method: str, path: str, body: Any = None) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(sock))
    with httpx.Client(transport=transport, base_url="http://policy", timeout=30) as client:
        return client.request(method, path, json=body)


def be_sandbox(cgroup_parent: str) -> dict[str, Any]:
    return envelope("RunPodSandbox", pod=pod(uid=POD_UID, qos="BE", cgroup_parent=cgroup_parent,
                                             annotations=batch_spec({"app": FULL})))


def forged_state(cgroup_parent: str, cgroups_path: str) -> dict[str, Any]:
    """A state naming kubelet's cgroup for a BE pod, its container in kubelet's processes."""
    the_pod = pod(uid=POD_UID, qos="BE", cgroup_parent=cgroup_parent,
                  annotations={**batch_spec({"app": FULL}),
                               "koordinator.sh/oom-score-adj": "1000"})
    container = {"id": "c1", "pod_sandbox_id": the_pod["id"], "name": "app",
                 "state": "CONTAINER_RUNNING",
                 "linux": {"cgroups_path": cgroups_path, "resources": {}}}
    return {"pods": [the_pod], "containers": [container]}


# The attacker's bridge: a standard-library HTTP server answering every GET with the state.
FORGED_BRIDGE = r'''
import http.server, json, os, socket, socketserver, sys
where, state = sys.argv[1], sys.argv[2].encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(state)))
        self.end_headers()
        self.wfile.write(state)
    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        self.rfile.read(n)
        body = b'{"failed": []}'
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
    def address_string(self):
        return "peer"
if where.startswith("unix:"):
    class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True
    server = S(where[5:], H)
else:
    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
    server = S(("127.0.0.1", 0), H)
    print(server.server_address[1], flush=True)
server.serve_forever()
'''


@contextmanager
def attacker_bridge(evil: Attacker, where: str, state: dict[str, Any]) -> Iterator[str]:
    """The forged bridge, run as the attacker; yields the address it serves."""
    proc = subprocess.Popen([PYTHON, "-I", "-c", FORGED_BRIDGE, where, json.dumps(state)],
                            user=evil.uid, group=evil.gid, extra_groups=[], cwd="/",
                            stdout=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"})
    try:
        if where.startswith("unix:"):
            path = Path(where[5:])
            wait_until(path.exists, what="the attacker's socket", timeout_s=30, interval_s=0.05)
            assert path.stat().st_uid == evil.uid
            yield f"unix://{path}"
        else:
            assert proc.stdout is not None
            yield f"http://127.0.0.1:{int(proc.stdout.readline())}"
    finally:
        proc.kill()
        proc.communicate(timeout=10)  # waits, and closes its stdout pipe


class _UnixHttp(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@contextmanager
def root_bridge(path: Path, state: dict[str, Any]) -> Iterator[list[str]]:
    """A trusted (root-served) bridge control socket answering ``state``; yields the paths
    asked for."""
    asked: list[str] = []
    body = json.dumps(state).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            reply = body if self.path == "/v1/state" else b"{}"
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-length", "13")
            self.end_headers()
            self.wfile.write(b'{"failed":[]}')

        def log_message(self, *args: Any) -> None:
            pass

        def address_string(self) -> str:
            return "bridge"

    server = _UnixHttp(str(path), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_besteffort_sandbox_naming_kubelets_cgroup_writes_nothing_there(
    workdir: Path, evil: Attacker
) -> None:
    node = fake_node(workdir)
    with policy_server(workdir, *node.args(), "--reconcile-interval", "0") as (sock, _, log):
        issue = post(sock, "POST", "/v1/policies/koordinator-qos", be_sandbox(f"/{KUBELET}"))
        assert issue.status_code == 200, issue.text
        # Below kubelet's cgroup, named so that the policy takes it for kube-BestEffort: only
        # the confinement stands between it and the write.
        refused = post(sock, "POST", "/v1/policies/koordinator-qos",
                       be_sandbox(f"/{KUBELET_CHILD}"))
        assert refused.status_code == 200, refused.text
        # The same pod under kubepods is written: the positive control.
        allowed = post(sock, "POST", "/v1/policies/koordinator-qos", be_sandbox(BE_SLICE))
        assert allowed.status_code == 200, allowed.text
        text = log.read_text()
    assert node.kubelet_files() == ORIGINAL and node.kubelet_files(KUBELET_CHILD) == ORIGINAL
    assert (node.root / BE_DIR / "memory.max").read_text().strip() == str(2 * 1024**3)
    refusal = [line for line in text.splitlines() if "pod cgroup write refused" in line]
    assert refusal and all(f"/{KUBELET_CHILD}" in line and "outside the pod hierarchy" in line
                           and "pod=default/pod-1" in line for line in refusal), refusal
    warnings = " ".join(refused.json().get("warnings", []))
    assert "refused" in warnings or "outside" in warnings, refused.json()


def test_a_symlink_in_the_kubepods_tree_is_not_followed(workdir: Path, evil: Attacker) -> None:
    node = fake_node(workdir)
    # A pod directory replaced by a symlink to kubelet's cgroup (by whoever could).
    other = node.root / BE_DIR.replace(BE_SLICE, "kubepods-besteffort-podevil.slice")
    other.symlink_to(node.root / KUBELET)
    with policy_server(workdir, *node.args(), "--reconcile-interval", "0") as (sock, _, log):
        answer = post(sock, "POST", "/v1/policies/koordinator-qos",
                      be_sandbox("kubepods-besteffort-podevil.slice"))
        assert answer.status_code == 200, answer.text
        text = log.read_text()
    assert node.kubelet_files() == ORIGINAL
    assert "symlink" in text, text[-3000:]


def test_plain_http_bridge_control_is_refused_at_start(workdir: Path, evil: Attacker) -> None:
    node = fake_node(workdir)
    state = forged_state(f"/{KUBELET}", f"/{KUBELET}")
    with attacker_bridge(evil, "tcp", state) as url:
        done = subprocess.run(
            [str(BIN / "nri-policy-server"), "--uds", str(workdir / "p.sock"), *node.args(),
             "--bridge-control", url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "plain http is refused" in done.stderr and "--bridge-control-insecure" in done.stderr
    assert node.kubelet_files() == ORIGINAL and node.oom(KUBELET_PID) == "0"


def test_a_forged_state_on_the_attackers_unix_socket_is_refused(
    workdir: Path, evil: Attacker
) -> None:
    node = fake_node(workdir)
    attacker_dir = workdir / "attacker"
    attacker_dir.mkdir()
    os.chown(attacker_dir, evil.uid, evil.gid)
    state = forged_state(f"/{KUBELET}", f"/{KUBELET}")
    with attacker_bridge(evil, f"unix:{attacker_dir / 'control.sock'}", state) as url, \
            policy_server(workdir, *node.args(), "--reconcile-interval", "0.2",
                          "--bridge-control", url) as (_, _, log):
        wait_until(lambda: log.read_text().count(f"served by uid {evil.uid}") >= 3,
                   what="three reconciler passes refusing the attacker's socket",
                   timeout_s=PASSES_TIMEOUT_S, interval_s=0.2, details=log.read_text)
    assert node.kubelet_files() == ORIGINAL and node.oom(KUBELET_PID) == "0"


def test_a_forged_state_over_insecure_http_still_writes_nothing_outside(
    workdir: Path, evil: Attacker
) -> None:
    # With the explicit opt-in the peer is not checked, but the state still goes through the
    # request decoder and every path it names is confined.
    node = fake_node(workdir)
    state = forged_state(f"/{KUBELET}", f"/{KUBELET}")
    with attacker_bridge(evil, "tcp", state) as url, \
            policy_server(workdir, *node.args(), "--reconcile-interval", "0.2",
                          "--bridge-control", url, "--bridge-control-insecure") as (_, _, log):
        wait_until(lambda: log.read_text().count("outside the pod hierarchy") >= 3,
                   what="reconciler passes refusing the forged paths",
                   timeout_s=PASSES_TIMEOUT_S, interval_s=0.2, details=log.read_text)
        assert "INSECURE" in log.read_text()
    assert node.kubelet_files() == ORIGINAL and node.oom(KUBELET_PID) == "0"


def test_oom_score_only_for_pids_in_the_containers_own_cgroup(workdir: Path) -> None:
    node = fake_node(workdir)
    good = forged_state(BE_SLICE, f"{BE_SLICE}:cri-containerd:c1")
    bad = forged_state(BE_SLICE, f"/{KUBELET}")
    bad["pods"][0].update(id="sandbox-2", uid="0f1e2d3c-aaaa-bbbb-cccc-000000000002",
                          name="pod-2")
    bad["containers"][0].update(id="c2", pod_sandbox_id="sandbox-2")
    state = {"pods": good["pods"] + bad["pods"],
             "containers": good["containers"] + bad["containers"]}
    control = workdir / "control.sock"
    with root_bridge(control, state) as asked, \
            policy_server(workdir, *node.args(), "--reconcile-interval", "0.2",
                          "--bridge-control", f"unix://{control}") as (_, _, log):
        wait_until(lambda: node.oom(POD_PID) == "1000", what="the pod's process scored",
                   timeout_s=PASSES_TIMEOUT_S, interval_s=0.2, details=log.read_text)
        wait_until(lambda: asked.count("/v1/state") >= 3, what="three reconciler passes",
                   timeout_s=PASSES_TIMEOUT_S, interval_s=0.2, details=log.read_text)
    assert node.oom(KUBELET_PID) == "0"
    assert "not a container's cgroup below a pod's" in log.read_text() or \
        "outside the pod hierarchy" in log.read_text()


def test_the_demo_starts_the_policy_server_on_fake_roots() -> None:
    from bridge import demo

    argv = demo.demo_policy_argv(Path("/tmp/nwb-demo-x"), Path("/tmp/nwb-demo-x/c.sock"))
    for flag in ("--cgroup-root", "--proc-root", "--resctrl-root"):
        assert flag in argv, argv
        assert argv[argv.index(flag) + 1].startswith("/tmp/nwb-demo-x/"), argv
    assert argv[argv.index("--systemd-properties") + 1] == "off", argv
