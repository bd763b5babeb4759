"""GPUEnvInject (docs/koordinator.md#gpuenvinject): NVIDIA_VISIBLE_DEVICES from the device
allocation, plus HAMi-core.

A HAMi-core error after NVIDIA_VISIBLE_DEVICES was decided keeps that env and reports the error
(koordlet's partial output under the ``Ignore`` failure policy).

The annotation is input, not authority (``authority``): unless the rules trust it, it names only
GPUs kubelet passed the container (``NVIDIA_VISIBLE_DEVICES`` minors already in its env, CDI
devices naming a GPU by number); one it names beyond those refuses the whole allocation (no
env, no HAMi-core).
"""

from __future__ import annotations

import posixpath

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.annotations import (
    AllocatedDevice,
    device_allocations,
    device_quantity,
)
from policy_server.policies.koordinator_qos.authority import (
    RULE_DEVICE_NOT_ALLOCATED,
    Refusal,
    allocated_gpu_minors,
)
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import ContainerTarget, HookResult, Stage
from policy_server.sdk import HostDirectory, Mount, PolicyError


def _bind(source: str, destination: str) -> Mount:
    return Mount(destination=destination, type="bind", source=source, options=("rbind",))


def _hami(first: AllocatedDevice, target: ContainerTarget, rules: Rules) -> HookResult:
    ratio = device_quantity(first, keys.RESOURCE_GPU_MEMORY_RATIO)
    if ratio is None:
        raise PolicyError(f"HAMi-core: first GPU has no {keys.RESOURCE_GPU_MEMORY_RATIO}")
    if ratio >= 100:
        return HookResult()
    memory = device_quantity(first, keys.RESOURCE_GPU_MEMORY)
    if memory is None:
        raise PolicyError(f"HAMi-core: first GPU has no {keys.RESOURCE_GPU_MEMORY}")
    library = rules.hami_core_library_path
    env = {keys.ENV_CUDA_DEVICE_MEMORY_LIMIT: str(memory)}
    core = device_quantity(first, keys.RESOURCE_GPU_CORE)
    if core is not None:
        env[keys.ENV_CUDA_DEVICE_SM_LIMIT] = str(core)
    env[keys.ENV_LD_PRELOAD] = library
    mounts = [_bind(library, library), _bind(keys.HAMI_VGPU_LOCK_DIR, keys.HAMI_VGPU_LOCK_DIR)]
    effects: tuple[HostDirectory, ...] = ()
    if rules.features.HamiCoreVGPUMonitor:
        lib_dir = posixpath.dirname(library)
        tag = f"{target.pod.pod.uid}_{target.name}"
        env[keys.ENV_CUDA_DEVICE_MEMORY_SHARED_CACHE] = f"{lib_dir}/{tag}.cache"
        host_dir = f"{lib_dir}/containers/{tag}"
        mounts.append(_bind(host_dir, lib_dir))
        # koordlet empties the directory first (os.RemoveAll, then MkdirAll 0777): a new
        # container never sees a previous one's cache file (docs/koordinator.md#gpuenvinject).
        effects = (
            HostDirectory(host_dir, keys.HAMI_CONTAINER_DIR_MODE, target.pod.label, emptied=True),
        )
    return HookResult(env=env, mounts=tuple(mounts), effects=effects)


def container(target: ContainerTarget, stage: Stage, rules: Rules) -> HookResult | None:
    allocations = device_allocations(target.pod.pod.annotations)
    gpus = (allocations or {}).get(keys.DEVICE_TYPE_GPU, ())
    if not gpus:
        return None
    key = keys.ANNOTATION_DEVICE_ALLOCATED
    if not target.pod.trusted(key, rules):
        given = allocated_gpu_minors(target.kubelet.env, target.kubelet.cdi_devices)
        beyond = sorted({g.minor for g in gpus} - given)
        if beyond:
            detail = (
                f"container {target.name}: GPU minors {beyond} were not allocated to it "
                f"(kubelet passed {sorted(given) or 'none'})"
            )
            refusal = Refusal("gpu env inject", target.pod.label, key, RULE_DEVICE_NOT_ALLOCATED,
                              detail)  # fmt: skip
            return HookResult(refusals=(refusal,))
    env = {keys.ENV_NVIDIA_VISIBLE_DEVICES: ",".join(str(g.minor) for g in gpus)}
    provider = target.pod.pod.labels.get(keys.LABEL_GPU_ISOLATION_PROVIDER)
    if provider != keys.GPU_ISOLATION_HAMI_CORE:
        return HookResult(env=env)
    try:
        hami = _hami(gpus[0], target, rules)
    except PolicyError as exc:
        return HookResult(env=env, errors=(str(exc),))
    return HookResult(env={**env, **hami.env}, mounts=hami.mounts, effects=hami.effects)
