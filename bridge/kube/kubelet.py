"""A pod as kubelet hands it to the runtime: CRI sandbox and container configs.

Owns: the labels and annotations kubelet adds, the hostname and log directory, the mounts it
builds (volumes, /etc/hosts, the termination log; the service-account token arrives as a
volume from bridge.kube.admission), the container order, and putting the resource rules
(bridge.kube.resources) and env rules (bridge.kube.env) together per container.
Must not: know what the runtime adds (bridge.kube.runtime_view) or NRI.
"""

from __future__ import annotations

import json
import zlib

from bridge.kube import env, resources
from bridge.kube.cri_config import CriContainer, CriMount, CriPod, CriResources
from bridge.kube.node import NodeSpec
from bridge.kube.pod_spec import ContainerSpec, PodSpec, ResourceList

KUBELET_ROOT = "/var/lib/kubelet"
POD_LOG_ROOT = "/var/log/pods"
# kubelet stamps the pod when its config source delivers it; a fixed stamp keeps output stable.
CONFIG_SEEN = "2026-01-01T00:00:00.000000000Z"
HOSTS_PATH = "/etc/hosts"
_VOLUME_PLUGIN_DIRS = {
    "emptyDir": "kubernetes.io~empty-dir", "configMap": "kubernetes.io~configmap",
    "secret": "kubernetes.io~secret", "projected": "kubernetes.io~projected",
    "downwardAPI": "kubernetes.io~downward-api", "nfs": "kubernetes.io~nfs",
    "image": "kubernetes.io~image",
}
_PROPAGATION = {"None": "private", "HostToContainer": "rslave", "Bidirectional": "rshared"}


def translate(pod: PodSpec, node: NodeSpec) -> CriPod:
    """The CRI view of `pod` on `node`."""
    qos = resources.pod_qos_class(pod)
    requests, limits = resources.pod_requests(pod), resources.pod_limits(pod)
    return CriPod(
        name=pod.name, namespace=pod.namespace, uid=pod.uid, qos_class=qos.value,
        # A host-network pod keeps the node's hostname: kubelet sends none.
        hostname="" if pod.host_network else _hostname(pod), node_name=node.name,
        log_directory=f"{POD_LOG_ROOT}/{pod.namespace}_{pod.name}_{pod.uid}",
        cgroup_parent=resources.cgroup_parent(pod, node),
        labels=tuple(sorted({**dict(pod.labels), **_pod_labels(pod)}.items())),
        annotations=tuple(sorted({**dict(pod.annotations),
                                  "kubernetes.io/config.seen": CONFIG_SEEN,
                                  "kubernetes.io/config.source": "file" if pod.static
                                  else "api"}.items())),
        resources=_cpu_memory(requests, limits),
        overhead=_cpu_memory(pod.overhead, pod.overhead) if pod.overhead else None,
        containers=tuple(_container(pod, c, node, i) for i, c in enumerate(pod.containers)),
        host_network=pod.host_network, host_pid=pod.host_pid, host_ipc=pod.host_ipc,
        share_process_namespace=pod.share_process_namespace, source=pod.source,
        runtime_handler=pod.runtime_handler, cgroup_version=node.cgroup_version)


def _pod_labels(pod: PodSpec) -> dict[str, str]:
    return {"io.kubernetes.pod.name": pod.name, "io.kubernetes.pod.namespace": pod.namespace,
            "io.kubernetes.pod.uid": pod.uid}


def _hostname(pod: PodSpec) -> str:
    # A hostname is a DNS label: at most 63 characters, no trailing '-' or '.'.
    return (pod.hostname or pod.name)[:63].rstrip("-.")


def _cpu_memory(requests: ResourceList, limits: ResourceList) -> CriResources:
    values = resources.cpu_memory(requests, limits)
    return CriResources(cpu_shares=values.cpu_shares, cpu_quota=values.cpu_quota,
                        cpu_period=values.cpu_period, memory_limit=values.memory_limit)


def _container(pod: PodSpec, c: ContainerSpec, node: NodeSpec, index: int) -> CriContainer:
    field = f"container {c.name}"
    values = resources.cpu_memory(c.requests, resources.container_limits(pod, c))
    swap, unified = resources.swap(values.memory_limit, node)
    res = CriResources(
        cpu_shares=values.cpu_shares, cpu_quota=values.cpu_quota, cpu_period=values.cpu_period,
        memory_limit=values.memory_limit, memory_swap_limit=swap,
        oom_score_adj=resources.kubelet_oom_score_adj(pod, c, node),
        hugepage_limits=resources.hugepage_limits(c, node), unified=tuple(sorted(unified.items())))
    annotations = {
        "io.kubernetes.container.hash": _hash(c),
        "io.kubernetes.container.restartCount": "0",
        "io.kubernetes.container.terminationMessagePath": c.termination_message_path,
        "io.kubernetes.container.terminationMessagePolicy": c.termination_message_policy,
        "io.kubernetes.pod.terminationGracePeriod": str(pod.termination_grace_s),
    }
    if c.ports:
        annotations["io.kubernetes.container.ports"] = json.dumps(
            [{**({"name": n} if n else {}), "containerPort": p, "protocol": proto}
             for n, p, proto in c.ports], separators=(",", ":"))
    return CriContainer(
        name=c.name, kind=c.kind, image=c.image, command=c.command, args=c.args,
        env=env.container_env(pod, c, node, field), mounts=_mounts(pod, c, index),
        labels=tuple(sorted({**_pod_labels(pod), "io.kubernetes.container.name": c.name}
                            .items())),
        annotations=tuple(sorted(annotations.items())), resources=res, privileged=c.privileged)


def _mounts(pod: PodSpec, c: ContainerSpec, index: int) -> tuple[CriMount, ...]:
    pod_dir = f"{KUBELET_ROOT}/pods/{pod.uid}"
    volumes = {v.name: v for v in pod.volumes}
    out = []
    for i, m in enumerate(c.mounts):
        volume = volumes[m.name]
        if m.sub_path:
            source = f"{pod_dir}/volume-subpaths/{m.name}/{c.name}/{i}"
        elif volume.kind == "hostPath":
            source = volume.host_path
        elif volume.kind in _VOLUME_PLUGIN_DIRS:
            source = f"{pod_dir}/volumes/{_VOLUME_PLUGIN_DIRS[volume.kind]}/{m.name}"
        else:  # persistentVolumeClaim, csi, ephemeral: a CSI volume (the PV's name is unknown)
            source = f"{pod_dir}/volumes/kubernetes.io~csi/{volume.host_path or m.name}/mount"
        out.append(CriMount(m.mount_path, source, m.read_only, _PROPAGATION[m.propagation]))
    if not any(m.container_path == HOSTS_PATH for m in out):
        out.append(CriMount(HOSTS_PATH, f"{pod_dir}/etc-hosts"))
    if c.termination_message_path:
        token = f"{zlib.crc32(f'{pod.uid}/{c.name}'.encode()):08x}"
        out.append(CriMount(c.termination_message_path,
                            f"{pod_dir}/containers/{c.name}/{token}"))
    return tuple(out)


def _hash(c: ContainerSpec) -> str:
    """A stand-in for kubelet's spec hash: stable per container spec (kubelet's own value is
    an FNV hash of its Go structure, which `try` does not reproduce). The repr is hashed under
    the class's first name, `Container`, so renaming the class leaves every hash as it was."""
    fields = repr(c).removeprefix(type(c).__name__)
    return f"{zlib.crc32(f'Container{fields}'.encode()):x}"
