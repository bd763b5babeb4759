"""What a runtime adds to kubelet's CRI configs before NRI sees them.

Owns: per runtime, the values that are the runtime's and not kubelet's, as recorded from
containerd 1.7.24 and 2.1.9 (bridge/simulator/scenarios, 2026-11-24): the OCI default mounts and the
sandbox files it bind-mounts, the device cgroup rule, the pause container's CPU shares and
image, the environment an image contributes (an image's own ENV is not known without the
image: containerd's default PATH stands in), and the labels/annotations it stamps.
Must not: know kubelet's rules or build messages (bridge.kube.runtime_view does).
"""

from __future__ import annotations

from dataclasses import dataclass

Mount = tuple[str, str, str, tuple[str, ...]]  # (destination, type, source, options)

_OCI_DEFAULT_MOUNTS: tuple[Mount, ...] = (
    ("/proc", "proc", "proc", ("nosuid", "noexec", "nodev")),
    ("/dev", "tmpfs", "tmpfs", ("nosuid", "strictatime", "mode=755", "size=65536k")),
    ("/dev/pts", "devpts", "devpts",
     ("nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5")),
    ("/dev/mqueue", "mqueue", "mqueue", ("nosuid", "noexec", "nodev")),
    ("/sys", "sysfs", "sysfs", ("nosuid", "noexec", "nodev", "ro")),
    ("/sys/fs/cgroup", "cgroup", "cgroup", ("nosuid", "noexec", "nodev", "relatime", "ro")),
)


@dataclass(frozen=True, slots=True)
class RuntimeDefaults:
    pause_image: str
    # The image's environment, first in the container's env (then HOSTNAME, then kubelet's).
    image_env: tuple[str, ...]
    default_mounts: tuple[Mount, ...]
    # Files of the sandbox bind-mounted into every container, unless kubelet mounts the path:
    # (destination, source template with {id} = the sandbox id).
    sandbox_files: tuple[tuple[str, str], ...]
    sandbox_cpu_shares: int  # the pause container's own cpu.shares
    deny_all_devices: bool  # resources.devices = [{allow: false, access: rwm}]
    kind_label: str  # label naming the object's kind (sandbox / container)
    annotation_prefix: str
    cgroup_systemd_prefix: str  # <slice>:<prefix>:<id> with the systemd driver
    netns_dir: str
    pause_image_annotation: bool  # io.kubernetes.cri.podsandbox.image-name on the pod
    # io.kubernetes.cri.sandbox-cpu-{period,quota,shares} and sandbox-memory from the pod's
    # totals (containerd 1.7, checked in tests/e2e)
    sandbox_resource_annotations: bool


_CRI_DIR = "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/{id}"
_CRI_RUN_DIR = "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/{id}"


def _containerd(pause_image: str, *, image_annotation: bool,
                resource_annotations: bool) -> RuntimeDefaults:
    return RuntimeDefaults(
        pause_image=pause_image, pause_image_annotation=image_annotation,
        sandbox_resource_annotations=resource_annotations,
        image_env=("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",),
        default_mounts=_OCI_DEFAULT_MOUNTS,
        sandbox_files=(("/etc/hostname", f"{_CRI_DIR}/hostname"),
                       ("/etc/hosts", f"{_CRI_DIR}/hosts"),
                       ("/etc/resolv.conf", f"{_CRI_DIR}/resolv.conf"),
                       ("/dev/shm", f"{_CRI_RUN_DIR}/shm")),
        sandbox_cpu_shares=2, deny_all_devices=True, kind_label="io.cri-containerd.kind",
        annotation_prefix="io.kubernetes.cri.", cgroup_systemd_prefix="cri-containerd",
        netns_dir="/var/run/netns")


CONTAINERD_1_7 = _containerd("registry.k8s.io/pause:3.8", image_annotation=False,
                             resource_annotations=True)
CONTAINERD_2 = _containerd("registry.k8s.io/pause:3.10", image_annotation=True,
                           resource_annotations=True)
