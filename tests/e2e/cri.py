"""A small CRI client for the e2e tests (grpcio over containerd's Unix socket).

Owns: building the pod and container configs the tests use (host network, empty
hostname, cgroup parent under this run's /nri-e2e-<run id>, busybox printing its env and
sleeping) and the handful of RuntimeService calls the tests need, each with a deadline.

Must not: know about NRI or the bridge; tests assert on what the runtime did.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from tests.waiting import wait_until

from . import cri_stubs
from .cgroup_scope import CGROUP_PREFIX
from .procs import scaled
from .runtimes import BUSYBOX_IMAGE

CALL_TIMEOUT_S = scaled(30.0)
MIB = 1024 * 1024

# The container's own resources, chosen to differ from the bridge's static adjustment
# so a test can tell who set a value.
BASE_CPU_SHARES = 1024
BASE_CPUSET = "0-1"
BASE_MEMORY_BYTES = 256 * MIB
CONTAINER_COMMAND = ["/bin/sh", "-c", "env; exec sleep 3600"]


@dataclass(frozen=True, slots=True)
class Pod:
    """A running pod sandbox and the config it was created with."""

    id: str
    uid: str
    config: Any  # PodSandboxConfig

    @property
    def cgroup_parent(self) -> str:
        return str(self.config.linux.cgroup_parent)


class CriClient:
    """RuntimeService and ImageService over one gRPC channel."""

    def __init__(self, address: Path) -> None:
        # The generated modules, loaded on first use: collecting the tests (as the default,
        # non-e2e pytest run does) must not need the CRI proto to be installed.
        self.pb, pb_grpc = cri_stubs.load()
        self._channel = grpc.insecure_channel(f"unix://{address}")
        self.runtime = pb_grpc.RuntimeServiceStub(self._channel)
        self.images = pb_grpc.ImageServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def version(self) -> Any:
        pb = self.pb
        return self.runtime.Version(pb.VersionRequest(), timeout=CALL_TIMEOUT_S)

    def wait_ready(self, timeout_s: float = 30.0) -> Any:
        """Wait until CRI answers Version (the socket exists before CRI serves)."""
        pb = self.pb
        def version() -> Any:
            try:
                return self.runtime.Version(pb.VersionRequest(), timeout=scaled(2.0))
            except grpc.RpcError:
                return None
        return wait_until(version, what="CRI answers Version", timeout_s=scaled(timeout_s),
                          interval_s=0.1)

    def wait_image(self, image: str, timeout_s: float = 30.0) -> None:
        """CRI learns about ctr-imported images asynchronously; wait until it sees one."""
        pb = self.pb
        spec = pb.ImageSpec(image=image)
        wait_until(lambda: self.images.ImageStatus(
            pb.ImageStatusRequest(image=spec), timeout=CALL_TIMEOUT_S).HasField("image"),
            what=f"CRI sees image {image}", timeout_s=scaled(timeout_s), interval_s=0.1)

    def run_pod(
        self,
        name: str = "e2e",
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        uid: str | None = None,
        cgroup_prefix: str = CGROUP_PREFIX,
        cgroup_parent: str | None = None,
    ) -> Pod:
        """A host-network pod; ``labels``/``annotations`` are added to the sandbox config; its
        cgroup parent is ``cgroup_parent`` if given, else ``/<cgroup_prefix>/pod<uid>``."""
        pb = self.pb
        uid = uid or str(uuid.uuid4())
        ns = pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.POD)
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(
                name=f"{name}-{uid[:8]}", uid=uid, namespace="default", attempt=0
            ),
            hostname="",
            labels={"app": "nri-e2e", **(labels or {})},
            annotations=dict(annotations or {}),
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=cgroup_parent or f"/{cgroup_prefix}/pod{uid}",
                security_context=pb.LinuxSandboxSecurityContext(namespace_options=ns),
            ),
        )
        reply = self.runtime.RunPodSandbox(
            pb.RunPodSandboxRequest(config=config), timeout=CALL_TIMEOUT_S
        )
        return Pod(id=reply.pod_sandbox_id, uid=uid, config=config)

    def create_container(
        self,
        pod: Pod,
        name: str = "app",
        resources: dict[str, Any] | None = None,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> str:
        """``resources`` overrides LinuxContainerResources fields (e.g. ``cpu_quota``);
        ``command`` replaces CONTAINER_COMMAND; ``env`` adds variables (as a device plugin's
        Allocate answer does through kubelet)."""
        pb = self.pb
        own = {
            "cpu_shares": BASE_CPU_SHARES,
            "cpuset_cpus": BASE_CPUSET,
            "memory_limit_in_bytes": BASE_MEMORY_BYTES,
            **(resources or {}),
        }
        ns = pod.config.linux.security_context.namespace_options
        config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=0),
            image=pb.ImageSpec(image=BUSYBOX_IMAGE),
            command=command or CONTAINER_COMMAND,
            envs=[pb.KeyValue(key="PATH", value="/bin"), pb.KeyValue(key="E2E_BASE", value="1"),
                  *(pb.KeyValue(key=k, value=v) for k, v in (env or {}).items())],
            labels={"app": "nri-e2e"},
            linux=pb.LinuxContainerConfig(
                resources=pb.LinuxContainerResources(**own),
                security_context=pb.LinuxContainerSecurityContext(namespace_options=ns),
            ),
        )
        reply = self.runtime.CreateContainer(
            pb.CreateContainerRequest(
                pod_sandbox_id=pod.id, config=config, sandbox_config=pod.config
            ),
            timeout=CALL_TIMEOUT_S,
        )
        return str(reply.container_id)

    def start_container(self, container_id: str) -> None:
        pb = self.pb
        self.runtime.StartContainer(
            pb.StartContainerRequest(container_id=container_id), timeout=CALL_TIMEOUT_S
        )

    def run_container(
        self,
        pod: Pod,
        name: str = "app",
        resources: dict[str, Any] | None = None,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> str:
        container_id = self.create_container(pod, name, resources, command, env)
        self.start_container(container_id)
        return container_id

    def exec_sync(self, container_id: str, cmd: list[str], timeout_s: int = 10) -> tuple[int, str]:
        """Run ``cmd`` in the container (CRI ExecSync): (exit code, stdout + stderr)."""
        pb = self.pb
        reply = self.runtime.ExecSync(
            pb.ExecSyncRequest(container_id=container_id, cmd=cmd, timeout=timeout_s),
            timeout=CALL_TIMEOUT_S,
        )
        return int(reply.exit_code), (reply.stdout + reply.stderr).decode(errors="replace")

    def update_cpu_shares(self, container_id: str, shares: int) -> None:
        pb = self.pb
        resources = pb.LinuxContainerResources(
            cpu_shares=shares, cpuset_cpus=BASE_CPUSET, memory_limit_in_bytes=BASE_MEMORY_BYTES
        )
        self.runtime.UpdateContainerResources(
            pb.UpdateContainerResourcesRequest(container_id=container_id, linux=resources),
            timeout=CALL_TIMEOUT_S,
        )

    def update_resources(self, container_id: str, **resources: Any) -> None:
        """UpdateContainerResources with these LinuxContainerResources fields only."""
        pb = self.pb
        self.runtime.UpdateContainerResources(
            pb.UpdateContainerResourcesRequest(
                container_id=container_id, linux=pb.LinuxContainerResources(**resources)
            ),
            timeout=CALL_TIMEOUT_S,
        )

    def container_status(self, container_id: str) -> tuple[Any, dict[str, Any]]:
        """(ContainerStatus, the verbose ``info`` JSON containerd adds)."""
        pb = self.pb
        reply = self.runtime.ContainerStatus(
            pb.ContainerStatusRequest(container_id=container_id, verbose=True),
            timeout=CALL_TIMEOUT_S,
        )
        return reply.status, json.loads(reply.info.get("info", "{}"))

    def container_pid(self, container_id: str) -> int:
        pb = self.pb
        status, info = self.container_status(container_id)
        pid = int(info.get("pid", 0))
        if status.state != pb.CONTAINER_RUNNING or pid <= 0:
            raise AssertionError(
                f"container {container_id} not running: state={status.state} pid={pid} "
                f"reason={status.reason!r} message={status.message!r}"
            )
        return pid

    def stop_container(self, container_id: str, grace_s: int = 0) -> None:
        pb = self.pb
        self.runtime.StopContainer(
            pb.StopContainerRequest(container_id=container_id, timeout=grace_s),
            timeout=CALL_TIMEOUT_S,
        )

    def remove_container(self, container_id: str) -> None:
        pb = self.pb
        self.runtime.RemoveContainer(
            pb.RemoveContainerRequest(container_id=container_id), timeout=CALL_TIMEOUT_S
        )

    def stop_pod(self, pod_id: str) -> None:
        pb = self.pb
        self.runtime.StopPodSandbox(
            pb.StopPodSandboxRequest(pod_sandbox_id=pod_id), timeout=CALL_TIMEOUT_S
        )

    def remove_pod(self, pod_id: str) -> None:
        pb = self.pb
        self.runtime.RemovePodSandbox(
            pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id), timeout=CALL_TIMEOUT_S
        )

    def remove_all(self) -> None:
        """Stop and remove every pod (and so every container) in the k8s.io namespace."""
        pb = self.pb
        pods = self.runtime.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=CALL_TIMEOUT_S)
        for item in pods.items:
            self.stop_pod(item.id)
            self.remove_pod(item.id)
