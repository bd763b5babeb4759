"""What kubelet asks of the runtime over CRI: the pod sandbox and container configs.

Owns: the immutable CRI-level values bridge.kube.kubelet produces (the subset of CRI's
PodSandboxConfig / ContainerConfig that reaches NRI). Must not: apply rules or know NRI.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.kube.pod_spec import ContainerKind

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class CriResources:
    """CRI LinuxContainerResources (0 = unset, as CRI has it)."""

    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = 0
    memory_limit: int = 0
    memory_swap_limit: int = 0
    oom_score_adj: int = 0
    hugepage_limits: tuple[tuple[str, int], ...] = ()  # (page size, bytes)
    unified: Pairs = ()


@dataclass(frozen=True, slots=True)
class CriMount:
    container_path: str
    host_path: str
    readonly: bool = False
    propagation: str = "private"  # private | rslave (HostToContainer) | rshared (Bidirectional)


@dataclass(frozen=True, slots=True)
class CriContainer:
    name: str
    kind: ContainerKind
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: Pairs  # in the order kubelet passes them
    mounts: tuple[CriMount, ...]
    labels: Pairs
    annotations: Pairs
    resources: CriResources
    privileged: bool = False

    @property
    def runs_to_completion(self) -> bool:
        return self.kind is ContainerKind.INIT


@dataclass(frozen=True, slots=True)
class CriPod:
    name: str
    namespace: str
    uid: str
    qos_class: str
    hostname: str  # empty for host-network pods (the runtime keeps the node's)
    log_directory: str
    cgroup_parent: str
    labels: Pairs
    annotations: Pairs
    resources: CriResources  # the pod's total (LinuxPodSandboxConfig.resources)
    overhead: CriResources | None  # LinuxPodSandboxConfig.overhead, when the pod has one
    containers: tuple[CriContainer, ...]  # in kubelet's start order
    host_network: bool = False
    host_pid: bool = False
    host_ipc: bool = False
    share_process_namespace: bool = False
    source: str = ""  # the manifest document, for messages
    node_name: str = ""  # the node's hostname, what a host-network container sees
    runtime_handler: str = ""  # RunPodSandboxRequest.runtime_handler ("" = the default)
    cgroup_version: int = 1  # the node's: on 2 the runtime gives containers a cgroup namespace
