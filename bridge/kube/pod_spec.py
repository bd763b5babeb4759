"""What `bridge.kube` reads from a manifest: a pod as the API server would hold it.

Owns: the immutable values the manifest reader produces and the kubelet rules consume (pods,
containers, volumes, env entries, mounts, resource lists with the API server's defaulting
already applied). Must not: parse YAML or apply kubelet rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

ResourceList = tuple[tuple[str, Fraction], ...]  # (resource name, exact quantity), sorted


def amount(resources: ResourceList, name: str) -> Fraction | None:
    """The quantity of `name`, or None when the list does not have it."""
    return next((q for n, q in resources if n == name), None)


class ContainerKind(Enum):
    INIT = "init"  # runs to completion before the next one starts
    SIDECAR = "sidecar"  # an init container with restartPolicy: Always (keeps running)
    REGULAR = "container"


@dataclass(frozen=True, slots=True)
class EnvVar:
    name: str
    value: str | None = None  # literal value (`value:`), None when `value_from` is set
    value_from: tuple[str, str, str] | None = None  # (source kind, reference, detail)


@dataclass(frozen=True, slots=True)
class VolumeMount:
    name: str
    mount_path: str
    read_only: bool = False
    sub_path: str = ""
    propagation: str = "None"  # None | HostToContainer | Bidirectional


@dataclass(frozen=True, slots=True)
class Volume:
    name: str
    kind: str  # emptyDir, hostPath, configMap, secret, projected, persistentVolumeClaim, ...
    host_path: str = ""  # hostPath's path; the claim name for persistentVolumeClaim


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    name: str
    image: str
    kind: ContainerKind
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()
    mounts: tuple[VolumeMount, ...] = ()
    requests: ResourceList = ()  # limits defaulted into requests, as the API server does
    limits: ResourceList = ()
    termination_message_path: str = "/dev/termination-log"
    termination_message_policy: str = "File"
    ports: tuple[tuple[str, int, str], ...] = ()  # (name, containerPort, protocol)
    privileged: bool = False


@dataclass(frozen=True, slots=True)
class PodSpec:
    source: str  # the document it came from, for messages
    name: str
    namespace: str
    uid: str
    labels: tuple[tuple[str, str], ...]
    annotations: tuple[tuple[str, str], ...]
    containers: tuple[ContainerSpec, ...]  # init containers (incl. sidecars) first, in spec order
    volumes: tuple[Volume, ...] = ()
    overhead: ResourceList = ()
    # Pod-level resources (`spec.resources`, CPU and memory), the API server's defaulting
    # applied (a pod-level limit without a pod-level request becomes the request).
    pod_requests: ResourceList = ()
    pod_limits: ResourceList = ()
    # The CRI runtime handler: the RuntimeClass's handler when the manifests have the class,
    # else `spec.runtimeClassName` itself; empty for the runtime's default.
    runtime_handler: str = ""
    service_account: str = "default"
    automount_token: bool = True
    host_network: bool = False
    host_pid: bool = False
    host_ipc: bool = False
    share_process_namespace: bool = False
    hostname: str = ""
    priority: int = 0  # spec.priority, or what the Priority admission fills in
    priority_class: str = ""
    termination_grace_s: int = 30
    enable_service_links: bool = True
    static: bool = False  # kubernetes.io/config.source other than "api" (a static pod)

    @property
    def regular_containers(self) -> tuple[ContainerSpec, ...]:
        return tuple(c for c in self.containers if c.kind is ContainerKind.REGULAR)
