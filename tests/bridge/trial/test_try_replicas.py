"""Issue 34, item 6: the pods of one `try` run (`--replicas N`) share the node until the run
ends, then are torn down in kubelet's order, so exclusive CPUs run out as they would: before,
each pod was torn down before the next was created, and all five got CPUs 1-2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # starts processes: not in make check

REPO = Path(__file__).resolve().parents[3]
CPU_POOLS = REPO / "examples" / "policies" / "cpu-pools.yaml"  # 8 CPUs, CPU 0 reserved
DB = REPO / "examples" / "tests" / "manifests" / "db-statefulset.yaml"  # 2 exclusive CPUs each


@pytest.mark.timeout(300)
def test_replicas_share_the_node_until_the_end() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bridge", "try", str(DB), "--replicas", "5", "--policy",
         f"cpu-pools={CPU_POOLS}", "--output", "json"],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr  # a pod was refused
    objects = json.loads(done.stdout)
    cpus = {o["pod"]: (o["effective"] or {}).get("resources", {}).get("cpu", {}).get("cpus")
            for o in objects}
    assert cpus == {"shop/db-0": "1-2", "shop/db-1": "4-5", "shop/db-2": "6-7",
                    "shop/db-3": None, "shop/db-4": None}
    refused = [o["pod"] for o in objects if o["reject"] is not None]
    assert refused == ["shop/db-3", "shop/db-4"]
    assert all("needs 2 exclusive CPUs" in o["reject"]["reason"] for o in objects
               if o["reject"] is not None)
