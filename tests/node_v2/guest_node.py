"""The cgroup v2 + systemd node inside the `make node-v2` guest, as the tests see it.

Owns: the guest's runtimes (containerd 2.1.9 with the systemd cgroup driver, over runc 1.3
or runc 1.1), what kubelet does around CRI with the systemd driver (the QoS slices at start,
each pod's slice made with its properties before RunPodSandbox, the expanded cgroup parent
it sends; for the e2e CRI client's pods and, as ``SystemdKubelet``, for rendered pods),
reading a process's cgroup v2 files, and both shares->weight conversions as an independent
oracle for the tests.

Must not: run outside the guest (``require_guest`` fails loudly there), or touch any unit or
cgroup the tests did not make.
"""

from __future__ import annotations

import math
import os
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cri import CriClient, Pod
from tests.e2e.procs import scaled
from tests.e2e.runtimes import CACHE_DIR, Runtime
from tests.shipped.kubelet import CPU_PERIOD_US, Kubelet, pod_resources, qos_class
from tests.waiting import wait_until

CGROUP_ROOT = Path("/sys/fs/cgroup")
RUNC_1_1 = Path("/usr/sbin/runc")  # trixie's: the linear shares->weight conversion
RUNC_1_3 = Path("/opt/runc-1.3/usr/sbin/runc")  # sid's: the quadratic one
# Emulation: the runtime's NRI request timeout sized for it (docs/e2e.md#the-cgroup-v2-node).
GUEST_NRI_TIMEOUT_S = 20


def guest_runtime(runc: Path = RUNC_1_3) -> Runtime:
    return Runtime(
        "2.1.9",
        CACHE_DIR / "containerd-2.1.9" / "usr" / "bin",
        3,
        "v0.8.0",
        systemd_cgroup=True,
        runc=runc,
        nri_request_timeout_s=GUEST_NRI_TIMEOUT_S,
    )


def require_guest() -> None:
    if os.environ.get("NRI_NODE_V2_GUEST") != "1":
        pytest.fail("node_v2 tests run inside the guest: `make node-v2`", pytrace=False)


# --- shares -> cpu.weight, computed here from the two formulas ------------------------------


def weight_linear(shares: int) -> int:
    """runc < 1.3.2, crun < 1.23 (and kubelet's own slices before that)."""
    return 1 + ((shares - 2) * 9999) // 262142


def weight_quadratic(shares: int) -> int:
    """runc >= 1.3.2, crun >= 1.23: a curve through (2, 1), (1024, 100), (262144, 10000)."""
    if shares <= 2:
        return 1
    if shares >= 262144:
        return 10000
    log2 = math.log2(shares)
    exponent = (log2 * log2 + 125 * log2) / 612.0 - 7.0 / 34.0
    return math.ceil(10**exponent)


def runc_weight(runc: Path, shares: int) -> int:
    return weight_quadratic(shares) if runc == RUNC_1_3 else weight_linear(shares)


# --- a process's cgroup v2 files ------------------------------------------------------------


def cgroup_dir(pid: int) -> Path:
    """The unified-hierarchy directory of ``pid`` (from its ``0::/path`` line)."""
    text = Path(f"/proc/{pid}/cgroup").read_text()
    for line in text.splitlines():
        if line.startswith("0::"):
            return CGROUP_ROOT / line[3:].lstrip("/")
    raise AssertionError(f"pid {pid} has no cgroup v2 line: {text}")


def read(directory: Path, name: str) -> str:
    return (directory / name).read_text().strip()


def wait_value(directory: Path, name: str, want: str, timeout_s: float = 20.0) -> None:
    wait_until(lambda: read(directory, name) == want, what=f"{directory}/{name} is {want!r}",
               timeout_s=scaled(timeout_s), interval_s=0.2,
               details=lambda: f"it is {read(directory, name)!r}")


# --- kubelet's side of the systemd driver ---------------------------------------------------

QOS_SLICES = ("kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort.slice")


def _busctl_start_slice(unit: str, props: list[tuple[str, str, str]]) -> None:
    """StartTransientUnit(unit, "replace", props, []) on systemd, as kubelet's cgroup
    manager does through runc's systemd manager."""
    args = [str(len(props))]
    for name, signature, value in props:
        args += [name, signature, value]
    subprocess.run(
        ["busctl", "call", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
         "org.freedesktop.systemd1.Manager", "StartTransientUnit", "ssa(sv)a(sa(sv))",
         unit, "replace", *args, "0"],
        check=True, capture_output=True, text=True, timeout=scaled(30),
    )  # fmt: skip


def slice_dir(unit: str) -> Path:
    """A slice's cgroup directory: ``a-b-c.slice`` lives under ``a.slice/a-b.slice/``."""
    stem = unit.removesuffix(".slice")
    parts = stem.split("-")
    path = CGROUP_ROOT
    for i in range(1, len(parts) + 1):
        path = path / ("-".join(parts[:i]) + ".slice")
    return path


def start_slice(unit: str, props: list[tuple[str, str, str]]) -> Path:
    _busctl_start_slice(unit, [("Description", "s", f"nri node-v2 {unit}"), *props])
    directory = slice_dir(unit)
    wait_until(directory.is_dir, what=f"systemd makes {directory} for {unit}",
               timeout_s=scaled(20), interval_s=0.1)
    return directory


def stop_unit(unit: str) -> None:
    subprocess.run(["systemctl", "stop", unit], capture_output=True, timeout=scaled(60))


def ensure_qos_slices() -> None:
    """kubelet's QoS level: kubepods.slice, then its burstable and besteffort children
    (besteffort gets cpu.weight 1, kubelet's shares 2)."""
    if not slice_dir("kubepods.slice").is_dir():
        start_slice("kubepods.slice", [])
    if not slice_dir("kubepods-burstable.slice").is_dir():
        start_slice("kubepods-burstable.slice", [])
    if not slice_dir("kubepods-besteffort.slice").is_dir():
        start_slice("kubepods-besteffort.slice", [("CPUWeight", "t", "1")])


@dataclass(frozen=True, slots=True)
class SlicePod:
    """A pod made as kubelet makes it on a systemd node."""

    pod: Pod
    qos: str
    unit: str  # kubepods-<qos>-pod<uid with _>.slice (kubepods-pod<uid>.slice: guaranteed)

    @property
    def uid(self) -> str:
        return self.pod.uid

    @property
    def directory(self) -> Path:
        return slice_dir(self.unit)

    @property
    def cgroup_parent(self) -> str:
        return self.pod.cgroup_parent


def pod_unit(qos: str, uid: str) -> str:
    escaped = uid.replace("-", "_")
    if qos == "guaranteed":
        return f"kubepods-pod{escaped}.slice"
    return f"kubepods-{qos}-pod{escaped}.slice"


def expanded_parent(unit: str) -> str:
    """What kubelet sends as the cgroup parent: the slice's full path (ToSystemd())."""
    return "/" + str(slice_dir(unit).relative_to(CGROUP_ROOT))


def start_pod_slice(
    qos: str,
    uid: str,
    cpu_weight: int | None = None,
    cpu_quota_per_sec_us: int | None = None,
    memory_max: int | None = None,
) -> str:
    """The pod's slice under its QoS slice, with kubelet's values for it; returns the unit."""
    ensure_qos_slices()
    unit = pod_unit(qos, uid)
    props: list[tuple[str, str, str]] = []
    if cpu_weight is not None:
        props.append(("CPUWeight", "t", str(cpu_weight)))
    if cpu_quota_per_sec_us is not None:
        props.append(("CPUQuotaPerSecUSec", "t", str(cpu_quota_per_sec_us)))
    if memory_max is not None:
        props.append(("MemoryMax", "t", str(memory_max)))
    start_slice(unit, props)
    return unit


class SystemdKubeletCri(CriClient):
    """The e2e CRI client, making pods as kubelet does on a systemd node: the pod's slice
    first (with kubelet's values for it), then RunPodSandbox with the expanded parent. The
    e2e tests written for the cgroupfs driver run unchanged on top of it. ``default_qos`` is
    the QoS slice of a pod whose test does not name one (those tests' pods sit in no QoS level
    on the host: a policy that reads the class from the parent takes them as Guaranteed)."""

    default_qos = "besteffort"

    def run_pod(
        self,
        name: str = "e2e",
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        uid: str | None = None,
        cgroup_prefix: str = "",
        cgroup_parent: str | None = None,
        *,
        qos: str | None = None,
        cpu_weight: int | None = None,
        cpu_quota_per_sec_us: int | None = None,
        memory_max: int | None = None,
    ) -> Pod:
        uid = uid or str(uuid.uuid4())
        unit = start_pod_slice(qos or self.default_qos, uid, cpu_weight, cpu_quota_per_sec_us,
                               memory_max)
        return super().run_pod(name, labels, annotations, uid=uid,
                               cgroup_parent=cgroup_parent or expanded_parent(unit))


def run_pod(
    cri: CriClient,
    name: str,
    qos: str = "besteffort",
    *,
    cpu_weight: int | None = None,
    cpu_quota_per_sec_us: int | None = None,
    memory_max: int | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> SlicePod:
    """A pod of QoS class ``qos`` with kubelet's slice values; ``cri`` is the guest's client."""
    assert isinstance(cri, SystemdKubeletCri), type(cri)
    pod = cri.run_pod(name, labels, annotations, qos=qos, cpu_weight=cpu_weight,
                      cpu_quota_per_sec_us=cpu_quota_per_sec_us, memory_max=memory_max)
    return SlicePod(pod, qos, pod_unit(qos, pod.uid))


class SystemdKubelet(Kubelet):
    """tests/shipped's kubelet for rendered pods, with the systemd driver: the pod's slice
    is made first, with the values kubelet computes from the pod spec (CPUWeight from the
    requests' shares in the node runtime's conversion, CPUQuotaPerSecUSec and MemoryMax where
    every container has that limit), and RunPodSandbox gets its expanded path."""

    def __init__(self, cri: CriClient, workdir: Path, host_paths: Mapping[str, Path],
                 runc: Path = RUNC_1_3) -> None:
        super().__init__(cri, workdir, "", host_paths)
        self.runc = runc

    def pod_cgroup_parent(self, uid: str, spec: dict[str, Any]) -> str:
        wanted = pod_resources(spec)
        quota = wanted.cpu_quota_us
        unit = start_pod_slice(
            qos_class(spec),
            uid,
            cpu_weight=runc_weight(self.runc, wanted.cpu_shares),
            cpu_quota_per_sec_us=None if quota is None else quota * 1_000_000 // CPU_PERIOD_US,
            memory_max=wanted.memory_bytes,
        )
        return expanded_parent(unit)
