"""docker-compose.yml for real: both services from the built image, with podman-compose, next to
a containerd 1.7.24 with NRI on /var/run/nri/nri.sock and CRI on
/run/containerd/containerd.sock (the paths the file names).

The file is used as shipped; what this machine's podman needs is done by the harness
(tests/shipped/compose.py). Checked: both containers running and healthy by their own
healthchecks, the bridge registered with that containerd, a pod created through CRI gets
koordinator-qos's pod-level value from the policy server container, and an update posted to the
bridge reaches its container through containerd's CRI socket.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.support import Compose
from tests.e2e.cgroup_scope import KUBEPODS
from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient
from tests.e2e.inspect_proc import cgroup_values
from tests.e2e.private_containerd import keep_log, require_installed, wait_serving
from tests.e2e.runtimes import RUNTIMES, InstanceDirs
from tests.waiting import wait_until

from .compose import ComposeProject, host_cri_socket, host_nri_dir, machine_lock
from .conftest import CGROUP_V1_ROOT
from .image import BuiltImage

# Fixture set-up (image build, containerd, pods) counts towards the timeout: generous.
pytestmark = [pytest.mark.shipped, pytest.mark.timeout(600)]

HEALTH_TIMEOUT_S = 60.0
QOS_LABEL = "koordinator.sh/qosClass"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"


@pytest.fixture(scope="module")
def stack(image: BuiltImage, containers_conf: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Containerd, ComposeProject]]:
    runtime = RUNTIMES[0]
    require_installed(runtime)
    base = Path(tempfile.mkdtemp(prefix="nri-shp-compose-", dir="/tmp"))
    containerd = Containerd(runtime, InstanceDirs(base))
    log_path = tmp_path_factory.mktemp("compose") / "compose.log"
    with log_path.open("w") as log:
        project = ComposeProject(image.ref, containers_conf, log)
        try:
            containerd.dirs.nri_socket.parent.mkdir(parents=True, exist_ok=True)
            with machine_lock(), host_nri_dir(containerd.dirs.nri_socket.parent):
                containerd.start()
                try:
                    containerd.import_images()
                    with host_cri_socket(containerd.dirs.address):
                        project.prepare()
                        project.up()
                        try:
                            yield containerd, project
                        finally:
                            with contextlib.suppress(Exception):
                                client = CriClient(containerd.dirs.address)
                                client.remove_all()
                                client.close()
                            for service in project.file["services"]:
                                log.write(f"--- {service}\n{project.logs(service)}\n")
                            project.down()
                finally:
                    containerd.stop()
        finally:
            keep_log(containerd.dirs.log, f"test_compose-containerd-{runtime.version}.log")
            keep_log(log_path, "test_compose-podman.log")
            containerd.cleanup()


def test_both_services_run_and_are_healthy(stack: tuple[Containerd, ComposeProject]) -> None:
    _, project = stack
    for service in project.file["services"]:
        assert project.state(service) == "running", project.logs(service)
        def healthy(service: str = service) -> bool:  # the file's own healthcheck command
            assert project.state(service) == "running", project.logs(service)
            return project.healthy(service)

        def logs(service: str = service) -> str:
            return project.logs(service)
        wait_until(healthy, what=f"{service} is healthy", timeout_s=HEALTH_TIMEOUT_S,
                   interval_s=0.5, details=logs)
    policy = project.logs("policy-server")
    assert "pod cgroup writes cannot take effect" not in policy, policy


def test_bridge_registered_and_a_pod_gets_its_policy(
        stack: tuple[Containerd, ComposeProject]) -> None:
    containerd, project = stack
    pid = project.pid("bridge")
    wait_until(lambda: f"[{pid}]\\\" registered" in containerd.log_text(),
               what="the bridge registers", timeout_s=HEALTH_TIMEOUT_S, interval_s=0.2,
               details=lambda: project.logs("bridge"))
    cri = CriClient(containerd.dirs.address)
    # Beneath /kubepods: the shipped policy server (kubelet's default cgroup root) writes
    # nowhere else.
    prefix = f"{KUBEPODS}/nri-shp-compose-{uuid.uuid4().hex[:8]}"
    uid = str(uuid.uuid4())
    pod_cpu = CGROUP_V1_ROOT / "cpu" / prefix / f"pod{uid}"
    try:
        wait_serving(cri)
        pod_cpu.mkdir(parents=True)
        (pod_cpu / "cpu.cfs_quota_us").write_text("50000\n")
        pod = cri.run_pod("lsr", labels={QOS_LABEL: "LSR"}, uid=uid, cgroup_prefix=prefix,
                          annotations={RESOURCE_STATUS: json.dumps({"cpuset": "1"})})
        cid = cri.run_container(pod, resources={"cpu_quota": 100000, "cpu_period": 100000})
        assert int((pod_cpu / "cpu.cfs_quota_us").read_text()) == -1, project.logs(
            "policy-server")[-3000:]
        cpuset = CGROUP_V1_ROOT / "cpuset" / prefix / f"pod{uid}" / cid / "cpuset.cpus"
        assert cpuset.read_text().strip() == "1"
        # An update posted to the bridge (as the policy server pushes them) reaches a running
        # container through the CRI socket the file mounts.
        plain = cri.run_pod("update", cgroup_prefix=prefix)
        plain_id = cri.run_container(plain)
        update = {"container_id": plain_id, "linux": {"resources": {"cpu": {"cpus": "0"}}}}
        answer = project.run(
            "podman", "exec", project.container("bridge"), "curl", "--fail-with-body",
            "--silent", "--show-error", "--max-time", "40", "--unix-socket",
            Compose().bridge_args.control_socket, "--header", "content-type: application/json",
            "--data", json.dumps({"update": [update]}), "http://bridge/v1/updates")
        assert json.loads(answer) == {"failed": []}, project.logs("bridge")[-3000:]
        assert cgroup_values(cri.container_pid(plain_id)).cpuset_cpus == "0"
        assert "updates go through CRI UpdateContainerResources" in project.logs("bridge")
        cri.remove_all()
    finally:
        cri.close()
        for hierarchy in CGROUP_V1_ROOT.iterdir():
            top = hierarchy / prefix
            if top.is_dir():
                for d in sorted((p for p in top.rglob("*") if p.is_dir()),
                                key=lambda p: -len(p.parts)):
                    with contextlib.suppress(OSError):
                        d.rmdir()
                with contextlib.suppress(OSError):
                    top.rmdir()
