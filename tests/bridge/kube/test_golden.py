"""Golden NRI messages for the translation: every manifest under tests/bridge/kube/manifests, on
four nodes: both cgroup drivers on both cgroup versions (cgroupfs + v2 and systemd + v2 with
containerd 2.1.9; cgroupfs + v1 and systemd + v1 with containerd 1.7.24).

The goldens are the PodSandbox and Container messages (contract JSON) a policy would receive;
they were reviewed against docs/try.md's rules when written. After a deliberate change,
regenerate with `UPDATE_GOLDEN=1 pytest tests/bridge/kube/test_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bridge.contract.convert import to_json
from bridge.kube import NodeSpec, container, load_pods, pod_sandbox, read_manifests, translate
from bridge.runtime_facts.profiles import PROFILES

HERE = Path(__file__).parent
MANIFESTS = sorted((HERE / "manifests").glob("*.yaml"))
NODES = {
    "cgroupfs-v2-containerd-2.1.9": (NodeSpec(cgroup_driver="cgroupfs", cgroup_version=2),
                                     "containerd-2.1.9"),
    "systemd-v1-containerd-1.7.24": (NodeSpec(cgroup_driver="systemd", cgroup_version=1,
                                              cpus=4, memory_bytes=16 << 30),
                                     "containerd-1.7.24"),
    "cgroupfs-v1-containerd-1.7.24": (NodeSpec(cgroup_driver="cgroupfs", cgroup_version=1,
                                               cpus=4, memory_bytes=16 << 30),
                                      "containerd-1.7.24"),
    "systemd-v2-containerd-2.1.9": (NodeSpec(cgroup_driver="systemd", cgroup_version=2),
                                    "containerd-2.1.9"),
}


def render(manifest: Path, node: NodeSpec, profile_key: str) -> list[dict[str, Any]]:
    profile = PROFILES[profile_key]
    out = []
    for i, pod in enumerate(load_pods([str(manifest)])):
        cri = translate(pod, node)
        sandbox = pod_sandbox(cri, profile, i)
        out.append({"qos_class": cri.qos_class, "pod": to_json(sandbox),
                    "containers": [{"kind": c.kind.value,
                                    "container": to_json(container(cri, c, sandbox, profile))}
                                   for c in cri.containers]})
    return out


@pytest.mark.parametrize("node_key", sorted(NODES))
@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.stem)
def test_golden(manifest: Path, node_key: str) -> None:
    node, profile = NODES[node_key]
    got = render(manifest, node, profile)
    golden = HERE / "golden" / f"{manifest.stem}.{node_key}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert golden.exists(), f"no golden {golden.name}: run with UPDATE_GOLDEN=1 and review it"
    assert got == json.loads(golden.read_text())


def test_every_required_case_has_a_manifest() -> None:
    stems = {p.stem for p in MANIFESTS}
    assert {"guaranteed-limits-only", "burstable-init-sidecar", "besteffort-cronjob",
            "tiny-cpu-hugepages", "kubectl-get-list", "sidecar-min-request", "zero-requests",
            "priority-classes", "pod-level-resources", "mixed-bundle"} <= stems


def test_mixed_bundle_notes_what_it_skipped() -> None:
    loaded = read_manifests([str(HERE / "manifests" / "mixed-bundle.yaml")])
    assert [note.split(": ")[0].split(" document ")[1] for note in loaded.skipped] == [
        "1 (ConfigMap web-config)", "2 (Service web)", "3 (RuntimeClass gvisor)",
        "6 (ServiceMonitor web)"]
    assert [p.name.split("-")[0] for p in loaded.pods] == ["web", "web", "db", "db", "legacy"]
