"""Hot reload of the rules file: poll, apply, reject invalid versions, keep the previous."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from policy_server.exceptions import RulesError
from policy_server.policies.koordinator_qos.rules import Rules, rules_from_yaml, stabilize
from policy_server.policies.koordinator_qos.rules_watcher import ReloadResult, RulesSource, watch


def source(path: Path) -> RulesSource[Rules]:
    return RulesSource(path, rules_from_yaml, Rules(), stabilize)


def rewrite(path: Path, text: str) -> None:
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # beat coarse mtimes


def test_reload_cycle(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("cpu_normalization_ratio: 1.2\n")
    src = source(path)
    src.load()
    assert src.current.cpu_normalization_ratio == 1.2 and src.generation == 1
    assert src.poll() is ReloadResult.UNCHANGED

    rewrite(path, "cpu_normalization_ratio: 1.5\n")
    assert src.poll() is ReloadResult.APPLIED
    assert src.current.cpu_normalization_ratio == 1.5 and src.generation == 2

    rewrite(path, "cpu_normalization_ratio: 1.5\nfeatures: {GPUEnvInject: 1}\n")
    assert src.poll() is ReloadResult.INVALID
    assert src.current.cpu_normalization_ratio == 1.5  # previous rules stay in force
    assert src.last_error is not None and src.last_error.startswith("features.GPUEnvInject")
    assert str(path) in src.last_error
    assert src.poll() is ReloadResult.UNCHANGED  # the broken version is reported once

    rewrite(path, "cpu_normalization_ratio: 1.5\n# only a comment changed\n")
    assert src.poll() is ReloadResult.UNCHANGED  # same rules: not a change
    assert src.last_error is None and src.generation == 2

    rewrite(path, "cpu_normalization_ratio: 1.505\n")
    assert src.poll() is ReloadResult.UNCHANGED  # koordlet ignores ratio moves < 0.01


def test_deleted_file_keeps_rules_and_recovers(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("disable_unset_cpu_quota: true\n")
    src = source(path)
    src.load()
    path.unlink()
    assert src.poll() is ReloadResult.INVALID
    assert src.current.disable_unset_cpu_quota is True
    assert "cannot stat" in (src.last_error or "")
    path.write_text("disable_unset_cpu_quota: false\n")
    assert src.poll() is ReloadResult.APPLIED and not src.current.disable_unset_cpu_quota


def test_configmap_style_symlink_swap_is_detected(tmp_path: Path) -> None:
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    (tmp_path / "v1/rules.yaml").write_text("failure_policy: Ignore\n")
    (tmp_path / "v2/rules.yaml").write_text("failure_policy: Fail\n")
    link = tmp_path / "rules.yaml"
    link.symlink_to(tmp_path / "v1/rules.yaml")
    src = source(link)
    src.load()
    tmp_link = tmp_path / "tmp-link"
    tmp_link.symlink_to(tmp_path / "v2/rules.yaml")
    tmp_link.replace(link)
    assert src.poll() is ReloadResult.APPLIED
    assert src.current.failure_policy.value == "Fail"


def test_initial_load_raises_with_the_key_and_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("features: {Nope: true}\n")
    with pytest.raises(RulesError) as info:
        source(path).load()
    assert info.value.key == "features.Nope" and str(path) in str(info.value)
    with pytest.raises(RulesError, match="cannot read"):
        source(tmp_path / "missing.yaml").load()
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe")
    with pytest.raises(RulesError, match="not UTF-8"):
        source(tmp_path / "binary.yaml").load()


async def test_watch_reports_each_poll_and_stops(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("")
    src = source(path)
    src.load()
    results: list[ReloadResult] = []
    stop = asyncio.Event()
    polled = asyncio.Event()  # the watcher has looked at the file at least once

    async def on_result(result: ReloadResult) -> None:
        results.append(result)
        polled.set()
        if result is ReloadResult.APPLIED:
            stop.set()

    async def stopped(timeout_s: float) -> bool:  # PolicyHost.stopped over ``stop``
        try:
            await asyncio.wait_for(stop.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    task = asyncio.create_task(watch(src, on_result, stopped, interval_s=0.01))
    await asyncio.wait_for(polled.wait(), 10)
    rewrite(path, "group_identity_kernel_support: true\n")
    await asyncio.wait_for(task, 10)
    assert results[-1] is ReloadResult.APPLIED and ReloadResult.UNCHANGED in results
    assert src.current.group_identity_kernel_support is True
