"""A run's cgroup prefix is its own, and its clean-up leaves another run's cgroups alone.

Not an e2e test (no containerd, no root): the hierarchies are directories under tmp_path shaped
like /sys/fs/cgroup, and the "containers" are sleep processes this test starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .cgroup_scope import (
    KUBEPODS,
    RUN_ID_ENV,
    cgroup_prefix,
    kill_cgroup_processes,
    remove_cgroups,
    sweep_dead_runs,
)

pytestmark = pytest.mark.processes  # starts processes: not in make check

ROOT = Path(__file__).resolve().parents[2]
HIERARCHIES = ("cpu", "memory", "cpuset")
WAIT_S = 30.0


def prefix_in_a_new_run(env: dict[str, str]) -> str:
    code = "from tests.e2e.cgroup_scope import CGROUP_PREFIX; print(CGROUP_PREFIX)"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=WAIT_S, check=True)
    return done.stdout.strip()


def test_every_run_has_its_own_prefix_and_its_children_share_it() -> None:
    fresh = {k: v for k, v in os.environ.items() if k != RUN_ID_ENV}
    first, second = prefix_in_a_new_run(fresh), prefix_in_a_new_run(fresh)
    assert first.startswith("nri-e2e-") and second.startswith("nri-e2e-")
    assert first != second
    # A process the run starts (a bridge, a helper module) inherits the id, hence the prefix.
    assert prefix_in_a_new_run({**fresh, RUN_ID_ENV: "r1"}) == cgroup_prefix("r1") == "nri-e2e-r1"


@pytest.fixture
def sleepers() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    procs = {run: subprocess.Popen(["sleep", "600"]) for run in ("mine", "theirs")}
    try:
        yield procs
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait(WAIT_S)


def make_pod_tree(root: Path, prefix: str, pid: int) -> None:
    for hierarchy in HIERARCHIES:
        container = root / hierarchy / prefix / "podu1" / "c1"
        container.mkdir(parents=True)
        (container / "cgroup.procs").write_text(f"{pid}\n")


def make_shipped_pod_tree(root: Path, prefix: str, pid: int) -> None:
    """A pod where the as-shipped tests put theirs: below ``kubepods``."""
    for hierarchy in HIERARCHIES:
        container = root / hierarchy / KUBEPODS / prefix / "podu1" / "c1"
        container.mkdir(parents=True)
        (container / "cgroup.procs").write_text(f"{pid}\n")


def test_clean_up_kills_and_removes_only_its_own_prefix(
    tmp_path: Path, sleepers: dict[str, subprocess.Popen[bytes]]
) -> None:
    mine, theirs = cgroup_prefix("mine"), cgroup_prefix("theirs")
    make_pod_tree(tmp_path, mine, sleepers["mine"].pid)
    make_pod_tree(tmp_path, theirs, sleepers["theirs"].pid)
    (tmp_path / "memory" / "unrelated").mkdir()

    assert kill_cgroup_processes(mine, tmp_path) == {sleepers["mine"].pid}
    assert sleepers["mine"].wait(WAIT_S) == -9
    assert sleepers["theirs"].poll() is None

    # On cgroupfs a directory's files go with it; here they are real files, so drop them.
    for procs in tmp_path.glob(f"*/{mine}/**/cgroup.procs"):
        procs.unlink()
    remove_cgroups(mine, tmp_path)
    for hierarchy in HIERARCHIES:
        assert not (tmp_path / hierarchy / mine).exists()
        assert (tmp_path / hierarchy / theirs / "podu1" / "c1" / "cgroup.procs").is_file()
    assert (tmp_path / "memory" / "unrelated").is_dir()


def test_clean_up_covers_its_prefix_below_kubepods_and_leaves_kubepods(
    tmp_path: Path, sleepers: dict[str, subprocess.Popen[bytes]]
) -> None:
    mine, theirs = cgroup_prefix("mine"), cgroup_prefix("theirs")
    make_pod_tree(tmp_path, mine, sleepers["mine"].pid)
    make_shipped_pod_tree(tmp_path, mine, sleepers["mine"].pid)
    make_shipped_pod_tree(tmp_path, theirs, sleepers["theirs"].pid)

    assert kill_cgroup_processes(mine, tmp_path) == {sleepers["mine"].pid}
    assert sleepers["mine"].wait(WAIT_S) == -9
    assert sleepers["theirs"].poll() is None

    for procs in tmp_path.glob(f"**/{mine}/**/cgroup.procs"):
        procs.unlink()
    remove_cgroups(mine, tmp_path)
    for hierarchy in HIERARCHIES:
        assert not (tmp_path / hierarchy / mine).exists()
        assert not (tmp_path / hierarchy / KUBEPODS / mine).exists()
        pods = tmp_path / hierarchy / KUBEPODS
        assert (pods / theirs / "podu1" / "c1" / "cgroup.procs").is_file()


def never_a_pid() -> int:
    """A PID no process can have (above the kernel's pid_max)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_sweep_removes_only_dead_runs_with_empty_cgroups(
    tmp_path: Path, sleepers: dict[str, subprocess.Popen[bytes]]
) -> None:
    dead = cgroup_prefix(f"{never_a_pid()}-abc123")  # its pytest is gone, nothing left in it
    live = cgroup_prefix(f"{os.getpid()}-def456")  # a run still going (this process)
    busy = cgroup_prefix(f"{never_a_pid()}-0a0b0c")  # gone, but a process is still in it
    by_hand = cgroup_prefix("r1")  # NRI_E2E_RUN_ID given by hand: never swept
    for hierarchy in HIERARCHIES:
        (tmp_path / hierarchy / dead / "podu1" / "c1").mkdir(parents=True)
        (tmp_path / hierarchy / KUBEPODS / dead / "podu1" / "c1").mkdir(parents=True)
        for prefix in (live, by_hand):
            (tmp_path / hierarchy / prefix / "podu1").mkdir(parents=True)
    make_shipped_pod_tree(tmp_path, busy, sleepers["theirs"].pid)
    (tmp_path / "memory" / "unrelated").mkdir()

    assert sweep_dead_runs(tmp_path) == [dead]
    for hierarchy in HIERARCHIES:
        assert not (tmp_path / hierarchy / dead).exists()
        assert not (tmp_path / hierarchy / KUBEPODS / dead).exists()
        for prefix in (live, by_hand):
            assert (tmp_path / hierarchy / prefix / "podu1").is_dir()
        assert (tmp_path / hierarchy / KUBEPODS / busy / "podu1").is_dir()
    assert (tmp_path / "memory" / "unrelated").is_dir()
    assert sleepers["theirs"].poll() is None  # a sweep signals nothing
    assert sweep_dead_runs(tmp_path) == []
