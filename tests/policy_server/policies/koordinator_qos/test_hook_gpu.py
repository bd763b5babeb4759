"""GPUEnvInject (docs/koordinator.md#gpuenvinject): NVIDIA_VISIBLE_DEVICES and HAMi-core."""

from __future__ import annotations

from typing import Any

import pytest

from policy_server.policies.koordinator_qos.annotations import AnnotationError
from policy_server.policies.koordinator_qos.hooks import gpu
from policy_server.policies.koordinator_qos.target import Stage
from policy_server.sdk.effects import HostDirectory
from policy_server.sdk.oci import Mount
from tests.policy_server.factory import TRUST_ALL, container_target, rules

DA = "scheduling.koordinator.sh/device-allocated"
HAMI = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}
LIB = "/usr/local/vgpu/libvgpu.so"


def run(devices: Any, labels: dict[str, str] | None = None, **doc: Any) -> Any:
    target = container_target(qos="LS", labels=labels, annotations={DA: devices},
                              uid="pod-uid", name="main")
    # koord-scheduler's allocation, trusted (koordinator's semantics; docs/koordinator.md#trust)
    return gpu.container(target, Stage.CREATE_CONTAINER, rules(**{"trust": TRUST_ALL, **doc}))


def test_visible_devices_from_minors() -> None:
    result = run({"gpu": [{"minor": 0}, {"minor": 1}], "rdma": [{"minor": 5}]})
    assert dict(result.env) == {"NVIDIA_VISIBLE_DEVICES": "0,1"}
    assert result.mounts == ()


def test_no_gpu_entries_no_env() -> None:
    assert run({"rdma": [{"minor": 1}]}) is None
    assert run({"gpu": []}) is None


def test_unparsable_allocation_is_a_hook_error() -> None:
    with pytest.raises(AnnotationError, match=DA):
        run("{nope")
    with pytest.raises(AnnotationError, match="minor: expected an integer"):
        run({"gpu": [{"minor": "0"}]})


def shared_gpu(**resources: Any) -> dict[str, Any]:
    return {"gpu": [{"minor": 3, "resources": resources}]}


def test_hami_core_shared_gpu() -> None:
    devices = shared_gpu(**{"koordinator.sh/gpu-memory-ratio": "50",
                            "koordinator.sh/gpu-memory": "8Gi", "koordinator.sh/gpu-core": "50"})
    result = run(devices, HAMI)
    assert dict(result.env) == {
        "NVIDIA_VISIBLE_DEVICES": "3",
        "CUDA_DEVICE_MEMORY_LIMIT": str(8 * 1024**3),
        "CUDA_DEVICE_SM_LIMIT": "50",
        "LD_PRELOAD": LIB,
    }
    assert result.mounts == (
        Mount(LIB, "bind", LIB, ("rbind",)),
        Mount("/tmp/vgpulock", "bind", "/tmp/vgpulock", ("rbind",)),
    )
    assert not result.errors and not result.effects


def test_hami_core_whole_gpu_needs_nothing_more() -> None:
    result = run(shared_gpu(**{"koordinator.sh/gpu-memory-ratio": "100"}), HAMI)
    assert dict(result.env) == {"NVIDIA_VISIBLE_DEVICES": "3"}


def test_hami_core_without_sm_limit_and_custom_library() -> None:
    devices = shared_gpu(**{"koordinator.sh/gpu-memory-ratio": 25,
                            "koordinator.sh/gpu-memory": "1Gi"})
    result = run(devices, HAMI, hami_core_library_path="/opt/hami/libvgpu.so")
    assert "CUDA_DEVICE_SM_LIMIT" not in result.env
    assert result.env["LD_PRELOAD"] == "/opt/hami/libvgpu.so"


@pytest.mark.parametrize(
    ("resources", "missing"),
    [
        ({}, "koordinator.sh/gpu-memory-ratio"),
        ({"koordinator.sh/gpu-memory-ratio": "50"}, "koordinator.sh/gpu-memory"),
    ],
)
def test_hami_error_keeps_visible_devices(resources: dict[str, str], missing: str) -> None:
    # koordlet keeps the env a failing hook already set (failure policy Ignore).
    result = run(shared_gpu(**resources), HAMI)
    assert dict(result.env) == {"NVIDIA_VISIBLE_DEVICES": "3"}
    assert len(result.errors) == 1 and missing in result.errors[0]


def test_hami_vgpu_monitor() -> None:
    devices = shared_gpu(**{"koordinator.sh/gpu-memory-ratio": "50",
                            "koordinator.sh/gpu-memory": "1Gi"})
    result = run(devices, HAMI, features={"HamiCoreVGPUMonitor": True})
    assert result.env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == "/usr/local/vgpu/pod-uid_main.cache"
    host_dir = "/usr/local/vgpu/containers/pod-uid_main"
    assert Mount("/usr/local/vgpu", "bind", host_dir, ("rbind",)) in result.mounts
    assert result.effects == (HostDirectory(host_dir, 0o777, "default/pod-1", emptied=True),)
