"""CRI configs from `bridge.kube`'s translation, as kubelet would send them (e2e only).

Owns: turning a CriPod / CriContainer into CRI PodSandboxConfig / ContainerConfig messages,
with the two changes the e2e machine needs — cgroups under the tests' private tree and
kubelet's directories under a private base — and mapping those back. Must not: decide any
value itself (every value comes from the translation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bridge.kube import CriContainer, CriPod
from bridge.kube.cri_config import CriResources

from .containerd import CGROUP_PREFIX

KUBELET_ROOT = "/var/lib/kubelet"
_PROPAGATION = {"private": "PROPAGATION_PRIVATE", "rslave": "PROPAGATION_HOST_TO_CONTAINER",
                "rshared": "PROPAGATION_BIDIRECTIONAL"}


class Placement:
    """Where the e2e puts what kubelet would put under /kubepods and /var/lib/kubelet."""

    def __init__(self, base: Path, containerd_root: Path, containerd_state: Path) -> None:
        self.kubelet_root = str(base / "kubelet")
        self.containerd_root = str(containerd_root)
        self.containerd_state = str(containerd_state)

    def cgroup(self, parent: str) -> str:
        return f"/{CGROUP_PREFIX}{parent}"

    def path(self, host_path: str) -> str:
        if host_path.startswith(KUBELET_ROOT + "/"):
            return self.kubelet_root + host_path[len(KUBELET_ROOT):]
        return host_path

    def back(self, text: str) -> str:
        """A value the runtime reported, with the e2e's placement undone."""
        return (text.replace(self.kubelet_root, KUBELET_ROOT)
                .replace(f"/{CGROUP_PREFIX}/kubepods", "/kubepods")
                .replace(self.containerd_root, "/var/lib/containerd")
                .replace(self.containerd_state, "/run/containerd"))


def resources(pb: Any, r: CriResources) -> Any:
    return pb.LinuxContainerResources(
        cpu_shares=r.cpu_shares, cpu_quota=r.cpu_quota, cpu_period=r.cpu_period,
        memory_limit_in_bytes=r.memory_limit, memory_swap_limit_in_bytes=r.memory_swap_limit,
        oom_score_adj=r.oom_score_adj,
        hugepage_limits=[pb.HugepageLimit(page_size=s, limit=n) for s, n in r.hugepage_limits],
        unified=dict(r.unified))


def sandbox_config(pb: Any, pod: CriPod, where: Placement) -> Any:
    ns = pb.NamespaceOption(network=pb.NODE if pod.host_network else pb.POD,
                            pid=pb.NODE if pod.host_pid else
                            pb.POD if pod.share_process_namespace else pb.CONTAINER,
                            ipc=pb.NODE if pod.host_ipc else pb.POD)
    linux = pb.LinuxPodSandboxConfig(
        cgroup_parent=where.cgroup(pod.cgroup_parent),
        security_context=pb.LinuxSandboxSecurityContext(namespace_options=ns),
        resources=resources(pb, pod.resources))
    if pod.overhead is not None:
        linux.overhead.CopyFrom(resources(pb, pod.overhead))
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=pod.name, uid=pod.uid, namespace=pod.namespace,
                                       attempt=0),
        hostname=pod.hostname, log_directory=pod.log_directory,
        labels=dict(pod.labels), annotations=dict(pod.annotations), linux=linux)


def container_config(pb: Any, pod: CriPod, c: CriContainer, sandbox: Any,
                     where: Placement) -> Any:
    mounts = []
    for m in c.mounts:
        host = where.path(m.host_path)
        if host.startswith(where.kubelet_root):
            # kubelet creates these before CreateContainer: files for single-file mounts
            # (/etc/hosts, the termination log), directories for volumes.
            target = Path(host)
            if m.container_path in ("/etc/hosts", "/dev/termination-log") or \
                    "/containers/" in host:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch(exist_ok=True)
            else:
                target.mkdir(parents=True, exist_ok=True)
        mounts.append(pb.Mount(container_path=m.container_path, host_path=host,
                               readonly=m.readonly,
                               propagation=getattr(pb, _PROPAGATION[m.propagation])))
    return pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=c.name, attempt=0),
        image=pb.ImageSpec(image=c.image), command=list(c.command), args=list(c.args),
        envs=[pb.KeyValue(key=k, value=v) for k, v in c.env], mounts=mounts,
        labels=dict(c.labels), annotations=dict(c.annotations), log_path=f"{c.name}/0.log",
        linux=pb.LinuxContainerConfig(
            resources=resources(pb, c.resources),
            security_context=pb.LinuxContainerSecurityContext(
                namespace_options=sandbox.linux.security_context.namespace_options)))
