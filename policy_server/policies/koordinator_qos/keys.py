"""Koordinator's label/annotation keys, resource names, feature-gate names and constants.

Carried over exactly from koordinator (docs/koordinator.md); nothing here is computed. Must not
import anything from the rest of the package.
"""

from __future__ import annotations

# Pod labels.
LABEL_QOS_CLASS = "koordinator.sh/qosClass"
LABEL_GPU_ISOLATION_PROVIDER = "koordinator.sh/gpu-isolation-provider"

# Pod annotations read by the hooks.
ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
ANNOTATION_EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
ANNOTATION_CPU_QOS = "koordinator.sh/cpuQOS"
ANNOTATION_RESCTRL = "node.koordinator.sh/resctrl"
ANNOTATION_OOM_SCORE_ADJ = "koordinator.sh/oom-score-adj"
ANNOTATION_OOM_SCORE_ADJ_SPEC = "koordinator.sh/oom-score-adj-spec"

# NodeResourceTopology annotations (rules for CPUSetAllocator) and the Node annotation for the
# CPU normalization ratio; the rules file uses these keys under ``topology``.
ANNOTATION_CPU_SHARED_POOLS = "node.koordinator.sh/cpu-shared-pools"
ANNOTATION_BE_CPU_SHARED_POOLS = "node.koordinator.sh/be-cpu-shared-pools"
ANNOTATION_SYSTEM_QOS_RESOURCE = "node.koordinator.sh/system-qos-resource"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
# Where CPU normalization takes effect (rules ``cpu_normalization_via``): through NRI, so the
# runtime records the scaled quota (and kubelet reports it back), or on the node beside the
# runtime, as koordlet writes it (docs/koordinator.md#cpunormalization-and-resize).
NORMALIZE_VIA_NRI, NORMALIZE_VIA_NODE = "nri", "node"

KUBELET_POLICY_STATIC = "static"

# Core scheduling labels (apis/slo/v1alpha1/pod.go); read by the reconciler.
LABEL_CORE_SCHED_GROUP_ID = "koordinator.sh/core-sched-group-id"
LABEL_CORE_SCHED_POLICY = "koordinator.sh/core-sched-policy"

# Every pod label and annotation the koordinator-qos policy reads: in koordinator they are
# written by koord-scheduler and koord-manager, never by a pod's author. The policy treats them
# as input, not authority (docs/security.md#pod-metadata-is-input-not-authority): what they grant
# beyond kubelet's decision needs the rules' ``trust``. This is the one declaration of the keys
# an admission policy must guard (deploy/kubernetes/admission/).
POD_LABEL_KEYS: tuple[str, ...] = (
    LABEL_QOS_CLASS,
    LABEL_GPU_ISOLATION_PROVIDER,
    LABEL_CORE_SCHED_GROUP_ID,
    LABEL_CORE_SCHED_POLICY,
)
POD_ANNOTATION_KEYS: tuple[str, ...] = (
    ANNOTATION_RESOURCE_STATUS,
    ANNOTATION_EXTENDED_RESOURCE_SPEC,
    ANNOTATION_DEVICE_ALLOCATED,
    ANNOTATION_CPU_QOS,
    ANNOTATION_RESCTRL,
    ANNOTATION_OOM_SCORE_ADJ,
    ANNOTATION_OOM_SCORE_ADJ_SPEC,
)
TRUSTED_KEYS: tuple[str, ...] = POD_LABEL_KEYS + POD_ANNOTATION_KEYS

# Extended resources.
RESOURCE_CPU = "cpu"
RESOURCE_BATCH_CPU = "kubernetes.io/batch-cpu"  # an integer quantity in milli-cores
RESOURCE_BATCH_MEMORY = "kubernetes.io/batch-memory"  # bytes
RESOURCE_GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
RESOURCE_GPU_MEMORY = "koordinator.sh/gpu-memory"
RESOURCE_GPU_CORE = "koordinator.sh/gpu-core"

DEVICE_TYPE_GPU = "gpu"
GPU_ISOLATION_HAMI_CORE = "HAMi-core"

ENV_NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
ENV_CUDA_DEVICE_MEMORY_LIMIT = "CUDA_DEVICE_MEMORY_LIMIT"
ENV_CUDA_DEVICE_SM_LIMIT = "CUDA_DEVICE_SM_LIMIT"
ENV_CUDA_DEVICE_MEMORY_SHARED_CACHE = "CUDA_DEVICE_MEMORY_SHARED_CACHE"
ENV_LD_PRELOAD = "LD_PRELOAD"
DEFAULT_HAMI_CORE_LIBRARY_PATH = "/usr/local/vgpu/libvgpu.so"
HAMI_VGPU_LOCK_DIR = "/tmp/vgpulock"
HAMI_CONTAINER_DIR_MODE = 0o777

# koordlet's per-pod resctrl groups are koordlet-<pod uid>; the node reconciler removes the
# groups named so that no live pod asks for (koordlet's RemoveUnusedResctrlPath) and never
# touches a group named otherwise.
RESCTRL_GROUP_PREFIX = "koordlet-"

# CFS / shares constants (kernel and kubelet conventions).
CFS_BASE_PERIOD_US = 100_000
CFS_QUOTA_MIN_US = 1_000
MIN_CPU_SHARES = 2
MAX_CPU_SHARES = 262_144
MIN_CPU_WEIGHT = 1
MAX_CPU_WEIGHT = 10_000
UNLIMITED = -1

BVT_MIN = -1
BVT_MAX = 2
OOM_SCORE_ADJ_MIN = -1000
OOM_SCORE_ADJ_MAX = 1000
# kubelet's oom_score_adj per pod QoS class (pkg/kubelet/qos/policy.go): Guaranteed -997,
# BestEffort 1000, Burstable 1000 - 1000*memoryRequest/memoryCapacity kept in
# [1000 + (-997), 999] = [3, 999]. The lowest value each class can get from kubelet.
KUBELET_OOM_GUARANTEED = -997
KUBELET_OOM_BURSTABLE_MIN = 3
KUBELET_OOM_BEST_EFFORT = 1000

# Feature gates: name -> koordlet default (docs/koordinator.md#what-runs-where,
# docs/koordinator.md#rules).
FEATURE_DEFAULTS: dict[str, bool] = {
    "BatchResource": True,
    "CPUNormalization": False,
    "CPUSetAllocator": True,
    "GroupIdentity": True,
    "Resctrl": False,
    "GPUEnvInject": False,
    "OOMScoreAdj": False,
    "BECPUManager": False,
    "HamiCoreVGPUMonitor": False,
    "CoreSched": False,
}
# Gates koordlet has but this port does not implement (docs/koordinator.md#what-runs-where):
# accepted only as false.
UNSUPPORTED_FEATURES = ("RDMADeviceInject", "TCNetworkQoS", "TerwayQoS")

CORE_SCHED_POLICY_EXCLUSIVE = "exclusive"
CORE_SCHED_POLICY_NONE = "none"
CORE_SCHED_EXPELLER_SUFFIX = "-expeller"
