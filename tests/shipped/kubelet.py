"""Run a rendered Kubernetes pod spec over CRI the way kubelet would, on one node.

Owns: kubelet's pod QoS class and pod-level resources (what it gives the pod cgroup), where
the pod cgroup goes (``pod_cgroup_parent``: cgroupfs here; a kubelet of the systemd driver
overrides it), materialising the pod's volumes on the host (hostPath, emptyDir, ConfigMap as
files, with fsGroup ownership), translating the pod and container specs into CRI's
PodSandboxConfig / ContainerConfig (namespaces, users, groups, capabilities, no_new_privs,
read-only root, seccomp, masked paths, resources, recursive read-only mounts where the runtime
reports them, the environment from ConfigMap keys and its $(VAR) expansion in command and
args), starting the sandbox and containers, and
running the declared exec probes with their timeouts.

Must not: read the manifests from anywhere but the rendered objects it is given, or change what
they declare. The one thing a test decides is where host paths live (``host_paths``): the NRI
directory and the CRI socket's directory of the private containerd, a fake resctrl tree. One
machine limit is applied and said (``notes``): a capability this machine's own bounding set
lacks cannot be granted by any runtime here (runc fails "unable to apply caps"), so it is left
out of ``add``.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from tests.deploy.support import container_env, expand, one, quantity
from tests.e2e.cri import CriClient
from tests.e2e.procs import scaled

from .security_context import CAP_BITS, read_proc

# kubelet's defaults (k8s.io/kubernetes/pkg/securitycontext) for a non-privileged container.
MASKED_PATHS = ["/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
                "/sys/firmware", "/sys/devices/virtual/powercap"]  # fmt: skip
READONLY_PATHS = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
CPU_PERIOD_US = 100_000
MIN_SHARES = 2
CRI_CALL_TIMEOUT_S = 60


class PodFailed(AssertionError):
    """The pod could not be created as declared, or a probe failed."""


@dataclass
class RunningPod:
    sandbox_id: str
    uid: str
    cgroup_parent: str
    containers: dict[str, str] = field(default_factory=dict)  # name -> container id


def milli_cpu(value: str | int) -> int:
    return round(quantity(value) * 1000)


def shares(milli: int) -> int:
    # kubelet's MilliCPUToShares
    return max(MIN_SHARES, milli * 1024 // 1000)


def _cpu_memory(c: dict[str, Any], kind: str) -> dict[str, str]:
    declared = c.get("resources", {})
    values = dict(declared.get(kind, {}))
    if kind == "requests":  # a limit without a request is also the request (API defaulting)
        values = {**declared.get("limits", {}), **values}
    return {k: v for k, v in values.items() if k in ("cpu", "memory")}


def qos_class(spec: dict[str, Any]) -> str:
    """kubelet's GetPodQOS: ``guaranteed``, ``burstable`` or ``besteffort``."""
    containers = spec["containers"]
    requests = [_cpu_memory(c, "requests") for c in containers]
    limits = [_cpu_memory(c, "limits") for c in containers]
    if not any(requests) and not any(limits):
        return "besteffort"
    if all(len(lim) == 2 and req == lim for req, lim in zip(requests, limits, strict=True)):
        return "guaranteed"
    return "burstable"


@dataclass(frozen=True, slots=True)
class PodResources:
    """What kubelet sets on the pod cgroup (ResourceConfigForPod)."""

    cpu_shares: int
    cpu_quota_us: int | None  # per CPU_PERIOD_US; None: no CPU limit on the pod
    memory_bytes: int | None  # None: no memory limit on the pod


def pod_resources(spec: dict[str, Any]) -> PodResources:
    """Sums over the containers; a pod limit only where every container has that limit."""
    containers = spec["containers"]
    if qos_class(spec) == "besteffort":
        return PodResources(MIN_SHARES, None, None)
    requests = [_cpu_memory(c, "requests") for c in containers]
    limits = [_cpu_memory(c, "limits") for c in containers]
    cpu = shares(sum(milli_cpu(r.get("cpu", 0)) for r in requests))
    quota = None
    if all("cpu" in lim for lim in limits):
        quota = sum(milli_cpu(lim["cpu"]) for lim in limits) * CPU_PERIOD_US // 1000
    memory = None
    if all("memory" in lim for lim in limits):
        memory = sum(int(quantity(lim["memory"])) for lim in limits)
    return PodResources(cpu, quota, memory)


class Kubelet:
    """Creates one rendered pod on a containerd over CRI."""

    def __init__(self, cri: CriClient, workdir: Path, cgroup_prefix: str,
                 host_paths: Mapping[str, Path]) -> None:
        self.cri = cri
        self.pb = cri.pb
        self.workdir = workdir
        self.cgroup_prefix = cgroup_prefix
        self.host_paths = dict(host_paths)
        self.notes: list[str] = []
        self._host_caps = read_proc(os.getpid()).cap_bnd

    def _grantable(self, container: str, caps: list[str]) -> list[str]:
        out = []
        for cap in caps:
            bit = CAP_BITS.get(cap.removeprefix("CAP_"))
            if bit is not None and not self._host_caps & (1 << bit):
                self.notes.append(f"{container}: capability {cap} left out: this machine's "
                                  "bounding set lacks it")
                continue
            out.append(cap)
        return out

    def pod_cgroup_parent(self, uid: str, spec: dict[str, Any]) -> str:
        """The pod cgroup's parent as kubelet sends it in RunPodSandbox. The cgroupfs driver:
        a directory under the prefix, made by the runtime."""
        return f"/{self.cgroup_prefix}/pod{uid}"

    # --- volumes ------------------------------------------------------------------------

    def _host_path(self, path: str) -> Path:
        for declared, real in self.host_paths.items():
            if path == declared or path.startswith(declared.rstrip("/") + "/"):
                return real / path[len(declared):].lstrip("/")
        return Path(path)

    def _volumes(self, docs: list[dict[str, Any]], spec: dict[str, Any], uid: str) -> dict[str,
                                                                                         Path]:
        fs_group = spec.get("securityContext", {}).get("fsGroup")
        base = self.workdir / "pods" / uid / "volumes"
        out: dict[str, Path] = {}
        for volume in spec.get("volumes", []):
            name = volume["name"]
            if "hostPath" in volume:
                declared = volume["hostPath"]
                path = self._host_path(declared["path"])
                kind = declared.get("type", "")
                if kind == "Directory" and not path.is_dir():
                    raise PodFailed(f"volume {name}: hostPath {declared['path']} ({path}) is not "
                                    "a directory (type: Directory)")
                if kind == "DirectoryOrCreate":
                    path.mkdir(parents=True, exist_ok=True)
                out[name] = path
                continue
            d = base / name
            d.mkdir(parents=True)
            if "emptyDir" in volume:
                if volume["emptyDir"].get("medium") == "Memory":
                    size = int(quantity(volume["emptyDir"].get("sizeLimit", "64Mi")))
                    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777",
                                    "tmpfs", str(d)], check=True)  # fmt: skip
                d.chmod(0o777)
            elif "configMap" in volume:
                cm = one(docs, "ConfigMap", volume["configMap"]["name"])
                for key, text in cm.get("data", {}).items():
                    (d / key).write_text(text)
                    (d / key).chmod(volume["configMap"].get("defaultMode", 0o644))
            else:
                raise PodFailed(f"volume {name}: kind not supported by this harness: {volume}")
            if fs_group is not None:
                # kubelet's SetVolumeOwnership: group fsGroup, group-writable, setgid dirs.
                for p in [d, *d.rglob("*")]:
                    os.chown(p, -1, int(fs_group))
                    mode = p.stat().st_mode & 0o7777
                    p.chmod(mode | 0o060 | (0o2000 if p.is_dir() else 0))
            out[name] = d
        return out

    def unmount_volumes(self) -> None:
        """Unmount the tmpfs emptyDirs this kubelet made (only under its own workdir)."""
        base = str(self.workdir / "pods")
        with open("/proc/self/mountinfo") as f:
            points = [line.split()[4] for line in f]
        for point in sorted((p for p in points if p.startswith(base + "/")), key=len,
                            reverse=True):
            subprocess.run(["umount", point], check=False, capture_output=True)

    # --- CRI configs --------------------------------------------------------------------

    def _namespaces(self, spec: dict[str, Any], sandbox: bool) -> Any:
        pb = self.pb
        return pb.NamespaceOption(
            network=pb.NODE if spec.get("hostNetwork") else pb.POD,
            pid=pb.NODE if spec.get("hostPID") else (pb.POD if sandbox else pb.CONTAINER),
            ipc=pb.NODE if spec.get("hostIPC") else pb.POD,
        )

    def _seccomp(self, ctx: dict[str, Any]) -> Any:
        pb = self.pb
        kind = ctx.get("seccompProfile", {}).get("type", "Unconfined")
        if kind == "Localhost":
            raise PodFailed("Localhost seccomp profiles are not supported by this harness")
        profile = {"RuntimeDefault": pb.SecurityProfile.RuntimeDefault,
                   "Unconfined": pb.SecurityProfile.Unconfined}[kind]  # fmt: skip
        return pb.SecurityProfile(profile_type=profile)

    @staticmethod
    def _groups(pod_ctx: dict[str, Any]) -> list[int]:
        groups = [int(g) for g in pod_ctx.get("supplementalGroups", [])]
        if "fsGroup" in pod_ctx:
            groups.append(int(pod_ctx["fsGroup"]))
        return groups

    def _sandbox_config(self, template: dict[str, Any], uid: str, namespace: str) -> Any:
        pb = self.pb
        spec = template["spec"]
        meta = template.get("metadata", {})
        pod_ctx = spec.get("securityContext", {})
        name = f"{meta.get('labels', {}).get('app.kubernetes.io/name', 'pod')}-{uid[:5]}"
        ctx = pb.LinuxSandboxSecurityContext(
            namespace_options=self._namespaces(spec, sandbox=True),
            supplemental_groups=self._groups(pod_ctx),
            seccomp=self._seccomp(pod_ctx),
        )
        if "runAsUser" in pod_ctx:
            ctx.run_as_user.value = int(pod_ctx["runAsUser"])
        logs = self.workdir / "pods" / uid / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace=namespace, attempt=0),
            hostname=name,
            log_directory=str(logs),
            labels={**meta.get("labels", {}), "io.kubernetes.pod.name": name,
                    "io.kubernetes.pod.namespace": namespace, "io.kubernetes.pod.uid": uid},
            annotations=dict(meta.get("annotations", {})),
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=self.pod_cgroup_parent(uid, spec), security_context=ctx),
        )

    def _resources(self, c: dict[str, Any]) -> Any:
        pb = self.pb
        requests = c.get("resources", {}).get("requests", {})
        limits = c.get("resources", {}).get("limits", {})
        out = pb.LinuxContainerResources(cpu_period=CPU_PERIOD_US)
        cpu_request = milli_cpu(requests.get("cpu", limits.get("cpu", 0)))
        out.cpu_shares = shares(cpu_request)
        if "cpu" in limits:
            out.cpu_quota = milli_cpu(limits["cpu"]) * CPU_PERIOD_US // 1000
        if "memory" in limits:
            out.memory_limit_in_bytes = int(quantity(limits["memory"]))
        return out

    def _recursive_read_only(self) -> bool:
        """Whether the runtime's default handler supports recursive read-only mounts (its
        Status, as kubelet reads it: containerd 1.7 reports no handlers, so no)."""
        status = self.cri.runtime.Status(self.pb.StatusRequest(), timeout=CRI_CALL_TIMEOUT_S)
        handlers = getattr(status, "runtime_handlers", [])
        return any(h.name == "" and h.features.recursive_read_only_mounts for h in handlers)

    def _mount(self, c: dict[str, Any], m: dict[str, Any], volumes: dict[str, Path]) -> Any:
        """kubelet's mount: readOnly, and recursiveReadOnly (Enabled: the runtime must support
        it, or the container fails; IfPossible: where it does)."""
        pb = self.pb
        readonly = bool(m.get("readOnly", False))
        rro = m.get("recursiveReadOnly", "Disabled")
        recursive = False
        if rro != "Disabled":
            if not readonly:
                raise PodFailed(f"{c['name']}: recursiveReadOnly needs readOnly: {m}")
            supported = self._recursive_read_only()
            if rro == "Enabled" and not supported:
                raise PodFailed(f"{c['name']}: recursiveReadOnly Enabled, runtime lacks it: {m}")
            recursive = supported
            if recursive:
                self.notes.append(f"{c['name']}: {m['mountPath']} recursively read-only")
        return pb.Mount(container_path=m["mountPath"], host_path=str(volumes[m["name"]]),
                        readonly=readonly, recursive_read_only=recursive,
                        propagation=pb.PROPAGATION_PRIVATE)

    def _container_config(self, docs: list[dict[str, Any]], spec: dict[str, Any],
                          c: dict[str, Any], volumes: dict[str, Path], image: str) -> Any:
        pb = self.pb
        pod_ctx = spec.get("securityContext", {})
        ctx = c.get("securityContext", {})
        caps = ctx.get("capabilities", {})
        security = pb.LinuxContainerSecurityContext(
            capabilities=pb.Capability(add_capabilities=self._grantable(c["name"],
                                                                        caps.get("add", [])),
                                       drop_capabilities=caps.get("drop", [])),
            privileged=bool(ctx.get("privileged", False)),
            namespace_options=self._namespaces(spec, sandbox=False),
            readonly_rootfs=bool(ctx.get("readOnlyRootFilesystem", False)),
            supplemental_groups=self._groups(pod_ctx),
            no_new_privs=ctx.get("allowPrivilegeEscalation") is False,
            masked_paths=[] if ctx.get("privileged") else MASKED_PATHS,
            readonly_paths=[] if ctx.get("privileged") else READONLY_PATHS,
            seccomp=self._seccomp(ctx if "seccompProfile" in ctx else pod_ctx),
        )
        for key, field_name in (("runAsUser", "run_as_user"), ("runAsGroup", "run_as_group")):
            value = ctx.get(key, pod_ctx.get(key))
            if value is not None:
                getattr(security, field_name).value = int(value)
        mounts = []
        for m in c.get("volumeMounts", []):
            if "subPath" in m:
                raise PodFailed(f"{c['name']}: subPath mounts are not supported by this harness")
            mounts.append(self._mount(c, m, volumes))
        # kubelet resolves the environment (ConfigMap keys) and expands $(VAR) in command
        # and args before it asks the runtime.
        env = container_env(docs, c)
        return pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=c["name"], attempt=0),
            image=pb.ImageSpec(image=image),
            command=[expand(a, env) for a in c.get("command", [])],
            args=[expand(a, env) for a in c.get("args", [])],
            working_dir=c.get("workingDir", ""),
            envs=[pb.KeyValue(key=k, value=v) for k, v in env.items()],
            mounts=mounts,
            labels={"io.kubernetes.container.name": c["name"]},
            log_path=f"{c['name']}/0.log",
            linux=pb.LinuxContainerConfig(resources=self._resources(c),
                                          security_context=security),
        )

    # --- running ------------------------------------------------------------------------

    def run(self, docs: list[dict[str, Any]], kind: str = "DaemonSet") -> RunningPod:
        """Create the pod of the one ``kind`` object in ``docs`` and start its containers."""
        pb = self.pb
        owner = one(docs, kind)
        template = owner["spec"]["template"]
        spec = template["spec"]
        if spec.get("initContainers"):
            raise PodFailed("init containers are not supported by this harness")
        uid = str(uuid.uuid4())
        volumes = self._volumes(docs, spec, uid)
        config = self._sandbox_config(template, uid, owner["metadata"]["namespace"])
        reply = self.cri.runtime.RunPodSandbox(pb.RunPodSandboxRequest(config=config),
                                               timeout=scaled(CRI_CALL_TIMEOUT_S))
        pod = RunningPod(reply.pod_sandbox_id, uid, config.linux.cgroup_parent)
        for c in spec["containers"]:
            cc = self._container_config(docs, spec, c, volumes, c["image"])
            created = self.cri.runtime.CreateContainer(
                pb.CreateContainerRequest(pod_sandbox_id=pod.sandbox_id, config=cc,
                                          sandbox_config=config),
                timeout=scaled(CRI_CALL_TIMEOUT_S))  # fmt: skip
            self.cri.start_container(created.container_id)
            pod.containers[c["name"]] = created.container_id
        return pod

    def probe(self, container_id: str, probe: dict[str, Any]) -> tuple[int, str]:
        """One run of an exec probe, with its declared timeout (times the harness's time
        scale: 1 on a host; the emulated v2 guest's runc exec alone takes seconds). A run
        that times out is a failed run, as for kubelet: (-1, the runtime's message)."""
        if "exec" not in probe:
            raise PodFailed(f"only exec probes are supported by this harness, not {probe}")
        timeout_s = math.ceil(scaled(int(probe.get("timeoutSeconds", 1))))
        try:
            return self.cri.exec_sync(container_id, probe["exec"]["command"], timeout_s=timeout_s)
        except grpc.RpcError as exc:
            # containerd's ExecSync: "timeout <d> exceeded: context deadline exceeded".
            if "exceeded" not in (exc.details() or ""):
                raise
            return -1, str(exc.details())

    def wait_ready(self, pod: RunningPod, spec: dict[str, Any], timeout_s: float,
                   logs: Any = None) -> dict[str, int]:
        """Run every container's readiness probe until it succeeds (as kubelet keeps probing);
        returns how many runs each took. The deadline is the harness's, not the probe's."""
        runs: dict[str, int] = {}
        deadline = time.monotonic() + timeout_s
        for c in spec["containers"]:
            probe = c.get("readinessProbe")
            if probe is None:
                continue
            cid = pod.containers[c["name"]]
            runs[c["name"]] = 0
            while True:
                runs[c["name"]] += 1
                try:
                    code, output = self.probe(cid, probe)
                except grpc.RpcError as exc:  # the container exited: say why, with its log
                    extra = logs() if logs is not None else ""
                    raise PodFailed(f"{c['name']}: readiness probe could not run: "
                                    f"{exc.details()}\n{extra}") from None
                if code == 0:
                    break
                self.cri.container_pid(cid)  # still running, or say why not
                if time.monotonic() > deadline:
                    extra = logs() if logs is not None else ""
                    raise PodFailed(f"{c['name']}: readiness probe still failing after "
                                    f"{timeout_s}s: exit {code}: {output}\n{extra}")
                time.sleep(0.2)
        return runs

    def container_log(self, pod: RunningPod, name: str) -> str:
        path = self.workdir / "pods" / pod.uid / "logs" / name / "0.log"
        return path.read_text(errors="replace") if path.exists() else ""
