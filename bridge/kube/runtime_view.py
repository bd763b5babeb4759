"""A CRI pod as the runtime shows it to NRI plugins: PodSandbox and Container messages.

Owns: what containerd does between CRI and NRI, for the values that reach NRI: ids, its
labels and annotations, namespaces, cgroups paths for both drivers, the OCI mounts (defaults,
sandbox files, kubelet's binds, ordered as containerd orders them), env (image, HOSTNAME,
kubelet's), resources as the OCI spec carries them (CRI's 0 = unset), the pause container's
own resources. The runtime-specific data comes from the runtime's profile
(bridge.runtime_facts.runtime_defaults). Must not: apply kubelet's rules or play events.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from bridge.contract import systemd_slice
from bridge.contract.convert import from_json, to_json
from bridge.kube.cri_config import CriContainer, CriMount, CriPod, CriResources
from bridge.kube.env import POD_IP
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.profiles import RuntimeProfile

FIRST_SANDBOX_PID = 4000  # stands in for the pause process's pid
_OPTIONS = {"private": "rprivate", "rslave": "rslave", "rshared": "rshared"}


def sandbox_id(pod: CriPod) -> str:
    return hashlib.sha256(f"sandbox/{pod.uid}".encode()).hexdigest()


def container_id(pod: CriPod, container: CriContainer) -> str:
    return hashlib.sha256(f"container/{pod.uid}/{container.name}".encode()).hexdigest()


def pod_sandbox(pod: CriPod, profile: RuntimeProfile, index: int = 0) -> api.PodSandbox:
    d = profile.defaults
    sid = sandbox_id(pod)
    pre = d.annotation_prefix
    annotations = {**dict(pod.annotations),
                   f"{pre}container-type": "sandbox", f"{pre}sandbox-id": sid,
                   f"{pre}sandbox-name": pod.name, f"{pre}sandbox-namespace": pod.namespace,
                   f"{pre}sandbox-uid": pod.uid, f"{pre}sandbox-log-directory": pod.log_directory}
    if d.pause_image_annotation:
        annotations[f"{pre}podsandbox.image-name"] = d.pause_image
    if d.sandbox_resource_annotations:
        r = pod.resources
        annotations.update({f"{pre}sandbox-cpu-period": str(r.cpu_period),
                            f"{pre}sandbox-cpu-quota": str(r.cpu_quota),
                            f"{pre}sandbox-cpu-shares": str(r.cpu_shares),
                            f"{pre}sandbox-memory": str(r.memory_limit)})
    namespaces: list[dict[str, Any]] = []
    if not pod.host_pid:
        namespaces.append({"type": "pid"})
    if not pod.host_ipc:
        namespaces.append({"type": "ipc"})
    if not pod.host_network:
        namespaces.append({"type": "uts"})
    namespaces.append({"type": "mount"})
    if not pod.host_network:
        namespaces.append({"type": "network", "path": _netns(pod, profile)})
    linux: dict[str, Any] = {
        "pod_resources": _pod_level(pod.resources),
        "cgroup_parent": pod.cgroup_parent,
        "cgroups_path": _cgroups_path(pod, sid, profile),
        "namespaces": namespaces,
        "resources": {"cpu": {"shares": d.sandbox_cpu_shares}, **_devices(profile)},
    }
    if pod.overhead is not None:
        linux["pod_overhead"] = _pod_level(pod.overhead)
    out: dict[str, Any] = {
        "id": sid, "name": pod.name, "uid": pod.uid, "namespace": pod.namespace,
        "labels": {**dict(pod.labels), d.kind_label: "sandbox"},
        "annotations": annotations, "linux": linux, "pid": FIRST_SANDBOX_PID + index,
        # containerd hands NRI the handler kubelet asked for in RunPodSandbox.
        "runtime_handler": pod.runtime_handler,
    }
    if profile.nri >= (0, 8, 0) and not pod.host_network:
        # containerd 2.x reports the pod's IPs; none for a host-network pod (tests/e2e).
        out["ips"] = [POD_IP]
    return from_json(out, api.PodSandbox)


def container(pod: CriPod, c: CriContainer, sandbox: api.PodSandbox,
              profile: RuntimeProfile) -> api.Container:
    d = profile.defaults
    cid = container_id(pod, c)
    pre = d.annotation_prefix
    annotations = {**dict(c.annotations), f"{pre}container-name": c.name,
                   f"{pre}container-type": "container", f"{pre}image-name": c.image,
                   f"{pre}sandbox-id": sandbox.id, f"{pre}sandbox-name": pod.name,
                   f"{pre}sandbox-namespace": pod.namespace, f"{pre}sandbox-uid": pod.uid}
    out: dict[str, Any] = {
        "id": cid, "pod_sandbox_id": sandbox.id, "name": c.name,
        "labels": {**dict(c.labels), d.kind_label: "container"},
        "annotations": annotations,
        "args": [*c.command, *c.args],
        "env": [*d.image_env, f"HOSTNAME={pod.hostname or pod.node_name}",
                *(f"{k}={v}" for k, v in c.env)],
        "mounts": _mounts(pod, c, sandbox.id, profile),
        "linux": {"namespaces": _container_namespaces(pod, c, sandbox),
                  "resources": {**_resources(c.resources), **_devices(profile)},
                  "oom_score_adj": c.resources.oom_score_adj,
                  "cgroups_path": _cgroups_path(pod, cid, profile)},
    }
    return from_json(out, api.Container)


def _netns(pod: CriPod, profile: RuntimeProfile) -> str:
    return f"{profile.defaults.netns_dir}/cni-{uuid.uuid5(uuid.NAMESPACE_URL, pod.uid)}"


def _cgroups_path(pod: CriPod, object_id: str, profile: RuntimeProfile) -> str:
    slice_ = pod.cgroup_parent.rsplit("/", 1)[-1]
    if systemd_slice.is_slice_name(slice_):
        # systemd: containerd names the unit's slice by the parent's last element only
        # (`<slice>:<prefix>:<id>`); kubelet sends the whole /kubepods.slice/... path.
        return systemd_slice.cgroups_path(
            slice_, profile.defaults.cgroup_systemd_prefix, object_id)
    return f"{pod.cgroup_parent}/{object_id}"


def _container_namespaces(pod: CriPod, c: CriContainer,
                          sandbox: api.PodSandbox) -> list[dict[str, Any]]:
    # uts and network are always the sandbox's, also on the host network (then the sandbox's
    # are the host's): checked against containerd 1.7.24 and 2.1.9 (tests/e2e). On cgroup v2
    # an unprivileged container gets a cgroup namespace of its own, last (containerd 2.1.9 on
    # the v2 node of `make node-v2`); never on v1.
    ns = f"/proc/{sandbox.pid}/ns"
    out: list[dict[str, Any]] = []
    if not pod.host_pid:
        out.append({"type": "pid", "path": f"{ns}/pid"} if pod.share_process_namespace
                   else {"type": "pid"})
    if not pod.host_ipc:
        out.append({"type": "ipc", "path": f"{ns}/ipc"})
    out.append({"type": "uts", "path": f"{ns}/uts"})
    out.append({"type": "mount"})
    out.append({"type": "network", "path": f"{ns}/net"})
    if pod.cgroup_version == 2 and not c.privileged:
        out.append({"type": "cgroup"})
    return out


def _mounts(pod: CriPod, c: CriContainer, sid: str, profile: RuntimeProfile,
            ) -> list[dict[str, Any]]:
    d = profile.defaults
    binds = list(c.mounts)
    binds += [CriMount(dest, src.format(id=sid)) for dest, src in d.sandbox_files
              if not any(m.container_path == dest for m in c.mounts)]
    # Kubelet's mounts, then the sandbox's files, replace OCI defaults at the same path (and
    # a /dev mount replaces everything under /dev); then they are ordered by depth, stably,
    # so a mount never hides one below it.
    taken = {m.container_path for m in binds}
    out = [{"destination": dest, "type": kind, "source": src, "options": list(opts)}
           for dest, kind, src, opts in d.default_mounts
           if dest not in taken and not ("/dev" in taken and dest.startswith("/dev/"))]
    binds.sort(key=lambda m: len([p for p in m.container_path.split("/") if p]))
    for m in binds:
        out.append({"destination": m.container_path, "type": "bind", "source": m.host_path,
                    "options": ["rbind", _OPTIONS[m.propagation], "ro" if m.readonly else "rw"]})
    return out


def _resources(r: CriResources) -> dict[str, Any]:
    cpu: dict[str, Any] = {}
    if r.cpu_shares:
        cpu["shares"] = r.cpu_shares
    if r.cpu_quota:
        cpu["quota"] = r.cpu_quota
    if r.cpu_period:
        cpu["period"] = r.cpu_period
    out: dict[str, Any] = {"cpu": cpu}
    if r.memory_limit:
        # The runtime caps memory+swap at the limit unless kubelet asked otherwise.
        out["memory"] = {"limit": r.memory_limit,
                         "swap": r.memory_swap_limit or r.memory_limit}
    if r.hugepage_limits:
        out["hugepage_limits"] = [{"page_size": s, "limit": n} for s, n in r.hugepage_limits]
    if r.unified:
        out["unified"] = dict(r.unified)
    return out


def _pod_level(r: CriResources) -> dict[str, Any]:
    # The pod's totals reach NRI as converted from CRI, zeros included.
    return {"cpu": {"shares": r.cpu_shares, "quota": r.cpu_quota, "period": r.cpu_period},
            "memory": {"limit": r.memory_limit}}


def _devices(profile: RuntimeProfile) -> dict[str, Any]:
    if profile.defaults.deny_all_devices:
        return {"devices": [{"allow": False, "access": "rwm"}]}
    return {}


def effective(state: api.Container) -> dict[str, Any]:
    """What a container ends with, as `try` reports it (and the kit's ``effective``)."""
    data = to_json(state)
    linux = data.get("linux", {})
    return {"resources": linux.get("resources", {}), "oom_score_adj": linux.get("oom_score_adj"),
            "env": data.get("env", []), "mounts": data.get("mounts", []),
            "devices": linux.get("devices", []), "cdi_devices": data.get("CDI_devices", []),
            "hooks": data.get("hooks", {}), "rlimits": data.get("rlimits", []),
            "annotations": data.get("annotations", {}), "sysctl": linux.get("sysctl", {})}
