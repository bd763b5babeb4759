"""`try` says what each runtime really applies of a reply (issue 33), from the one field table
(bridge/contract/runtime_effects.py): an ignored leaf is reported as ignored and never shown as
effective, `memory.limit` sets swap, a lost sysctl removal is reported, and an in-place resize
(`--resize`) shows what each runtime keeps of an UpdateContainer reply and of another
container's update (CRI-O keeps pids and the memory reservation there; containerd does not)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import run_try
from .unix_webhook import JsonWebhook, serving

pytestmark = pytest.mark.processes  # starts processes: not in make check

POD = """\
kind: Pod
metadata: {name: db, namespace: shop}
spec:
  containers:
  - {name: app, image: "app:1", resources: {limits: {cpu: "1", memory: 512Mi}}}
  - {name: side, image: "side:1", resources: {limits: {cpu: "1", memory: 512Mi}}}
"""
GI = 1 << 30


class _Canned(JsonWebhook):
    """CreateContainer: memory.limit + memory.swappiness (app), a sysctl removal (side).
    UpdateContainer of app: its own pids, swappiness, limit and shares, and side's pids and
    memory reservation."""

    ids: dict[str, str] = {}

    def reply(self, request: Any) -> Any:
        ctr = request.get("container") or {}
        self.ids[ctr.get("name", "")] = ctr.get("id", "")
        reply: dict[str, Any] = {}
        if request["event"] == "CreateContainer" and ctr["name"] == "app":
            reply = {"adjust": {"linux": {"resources": {"memory": {
                "limit": GI, "swappiness": 10}}}}}
        elif request["event"] == "CreateContainer":
            reply = {"adjust": {"remove": {"sysctl": ["net.core.somaxconn"]}}}
        elif request["event"] == "UpdateContainer" and ctr["name"] == "app":
            reply = {"update": [
                {"container_id": ctr["id"], "linux": {"resources": {
                    "memory": {"limit": 2 * GI, "swappiness": 5},
                    "cpu": {"shares": 1000}, "pids": {"limit": 100}}}},
                {"container_id": self.ids["side"], "linux": {"resources": {
                    "memory": {"reservation": GI}, "pids": {"limit": 50}}}}]}
        return reply


@pytest.fixture
def config(tmp_path: Path) -> Iterator[Path]:
    with serving(tmp_path / "canned.sock", _Canned) as sock:
        path = tmp_path / "bridge.yaml"
        path.write_text(json.dumps({"webhooks": [{
            "name": "tuner", "url": f"unix://{sock}/v1/policies/x",
            "events": ["CreateContainer", "UpdateContainer"],
            "allow": ["resources", "sysctl"]}]}))
        yield path


def _try(config: Path, tmp_path: Path, profile: str, *extra: str) -> dict[str, dict[str, Any]]:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    done = run_try(str(manifest), "--config", str(config), "--profile", profile,
                   "--output", "json", *extra)
    assert done.returncode == 0, done.stderr
    return {o["container"]: o for o in json.loads(done.stdout)}


def _notes(obj: dict[str, Any]) -> list[str]:
    return [n["message"] for n in obj["runtime"]]


def test_swappiness_is_ignored_and_swap_is_the_limit(config: Path, tmp_path: Path) -> None:
    app = _try(config, tmp_path, "containerd-2.1.9")["app"]
    assert _notes(app) == [
        f"containerd 2.1.9 sets memory.swap to memory.limit ({GI}) from an adjustment",
        "containerd 2.1.9 ignores memory.swappiness in an adjustment"]
    memory = app["effective"]["resources"]["memory"]
    assert memory == {"limit": GI, "swap": GI}  # no swappiness: never effective
    table = run_try(str(tmp_path / "pod.yaml"), "--config", str(config),
                    "--profile", "containerd-2.1.9").stdout
    assert "runtime: containerd 2.1.9 ignores memory.swappiness in an adjustment (tuner, " \
           "CreateContainer)" in table
    assert "memory=1Gi swap=1Gi" in table


def test_a_sysctl_removal_is_lost_on_containerd_2_3_4(config: Path, tmp_path: Path) -> None:
    side = _try(config, tmp_path, "containerd-2.3.4")["side"]
    (note,) = side["runtime"]
    assert note["field"] == "linux.sysctl" and note["effect"] == "removal lost"
    assert note["message"] == ("containerd 2.3.4 loses the removal of sysctl net.core.somaxconn "
                               "in an adjustment (it removes the annotation net.core.somaxconn "
                               "instead)")


def test_containerd_2_4_loses_a_sysctl_removal_until_ga(config: Path, tmp_path: Path) -> None:
    """`try --profile` knows containerd 2.4: the beta (NRI v0.12.1) loses a lone sysctl removal
    as 2.3.4 does, 2.4.0 GA (v0.12.3) applies it and has nothing to say."""
    beta = _try(config, tmp_path, "containerd-2.4.0-beta.0")["side"]
    (note,) = beta["runtime"]
    assert note["effect"] == "removal lost"
    assert note["message"].startswith("containerd 2.4.0-beta.0 loses the removal of sysctl "
                                      "net.core.somaxconn")
    assert _try(config, tmp_path, "containerd-2.4.0")["side"]["runtime"] == []


@pytest.mark.parametrize("profile", ["containerd-2.1.9", "cri-o-1.36.3"])
def test_a_resize_shows_what_each_runtime_keeps(config: Path, tmp_path: Path,
                                                profile: str) -> None:
    out = _try(config, tmp_path, profile, "--resize", "app=cpu:500m,memory:256Mi")
    app, side = out["app"], out["side"]
    assert "UpdateContainer" in app["requests"]
    label = "containerd 2.1.9" if profile.startswith("containerd") else "cri-o 1.36.3"
    reply = "in an UpdateContainer reply"
    for leaf in ("memory.swappiness", "pids", "memory.reservation"):
        assert f"{label} ignores {leaf} {reply}" in _notes(app)
    resources = app["effective"]["resources"]
    assert resources["memory"]["limit"] == 2 * GI  # the reply's, over the resize's
    assert resources["cpu"]["shares"] == 1000
    assert "pids" not in resources and "swappiness" not in resources["memory"]
    # Swap follows the new limit on containerd (WithResources); CRI-O leaves it where the
    # adjustment's limit put it at creation (issue 33, lab).
    swap = resources["memory"].get("swap")
    assert swap == (2 * GI if label.startswith("containerd") else GI)
    # The sibling's update passes NRI's merge too: no pids, no reservation, on either runtime.
    kept = side["effective"]["resources"]
    assert "pids" not in kept and "reservation" not in kept.get("memory", {})


def test_a_suite_case_plays_a_resize_and_checks_what_the_runtime_keeps(
        config: Path, tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(POD)
    suite = {"webhooks": {"config": str(config)},
             "node": {"profile": "cri-o-1.36.3"},
             "cases": [{"name": "a resize on CRI-O", "manifests": ["pod.yaml"],
                        "resize": ["app=cpu:500m,memory:256Mi"],
                        "expect": [{"pod": "shop/db", "container": "app",
                                    "runtime": ["cri-o 1.36.3 ignores pids in an UpdateContainer "
                                                "reply", "ignores memory.swappiness"],
                                    "effective": {"resources.memory.limit": 2 * GI,
                                                  "resources.memory.swap": GI}}]}]}
    (tmp_path / "suite.yaml").write_text(json.dumps(suite))
    done = subprocess.run([sys.executable, "-m", "bridge", "test", "suite.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "1 passed, 0 failed"


def test_a_suite_knows_containerd_2_4(config: Path, tmp_path: Path) -> None:
    """A suite's `node.profile` takes the 2.4 profiles: the beta loses the sysctl removal and
    says so; on 2.4.0 GA the case that expects that note fails."""
    (tmp_path / "pod.yaml").write_text(POD)
    note = "containerd 2.4.0-beta.0 loses the removal of sysctl net.core.somaxconn"
    for profile, passed in (("containerd-2.4.0-beta.0", True), ("containerd-2.4.0", False)):
        suite = {"webhooks": {"config": str(config)}, "node": {"profile": profile},
                 "cases": [{"name": f"sysctl removal on {profile}", "manifests": ["pod.yaml"],
                            "expect": [{"pod": "shop/db", "container": "side",
                                        "runtime": [note]}]}]}
        (tmp_path / "suite.yaml").write_text(json.dumps(suite))
        done = subprocess.run([sys.executable, "-m", "bridge", "test", "suite.yaml"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              check=False)
        assert done.returncode == (0 if passed else 1), done.stdout + done.stderr
        assert done.stdout.splitlines()[-1] == ("1 passed, 0 failed" if passed
                                                else "0 passed, 1 failed")
