"""From Kubernetes manifests to what kubelet and the runtime send over NRI.

    pods = load_pods(["pod.yaml"])                   # bridge.kube.manifest
    cri = translate(pods[0], NodeSpec())             # kubelet's rules -> CRI configs
    sandbox = pod_sandbox(cri, profile)              # + the runtime's additions -> NRI
    ctr = container(cri, cri.containers[0], sandbox, profile)

Used by `nri-webhook-bridge try` and the policy test kit's `send_pod`. docs/try.md lists the
rules and what kubelet does that this package does not. Must not: do I/O beyond reading the
manifests it is given, or import the plugin's runtime layers.
"""

from bridge.kube.call_order import IN_PLACE, SNAPSHOT, CallStep, kubelet_order
from bridge.kube.cri_config import CriContainer, CriPod
from bridge.kube.documents import parse_documents, read_manifest_documents
from bridge.kube.kubelet import translate
from bridge.kube.manifest import Manifests, load_pods, manifests_from, read_manifests
from bridge.kube.manifest_error import ManifestError
from bridge.kube.node import NodeSpec
from bridge.kube.pod_spec import ContainerKind, PodSpec
from bridge.kube.runtime_view import (
    container,
    container_id,
    effective,
    pod_sandbox,
    sandbox_id,
)
from bridge.kube.workloads import pods_of

__all__ = [
    "IN_PLACE",
    "SNAPSHOT",
    "CallStep",
    "ContainerKind",
    "CriContainer",
    "CriPod",
    "ManifestError",
    "Manifests",
    "NodeSpec",
    "PodSpec",
    "container",
    "container_id",
    "effective",
    "kubelet_order",
    "load_pods",
    "manifests_from",
    "parse_documents",
    "pod_sandbox",
    "pods_of",
    "read_manifest_documents",
    "read_manifests",
    "sandbox_id",
    "translate",
]
