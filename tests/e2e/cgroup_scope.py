"""This run's pod cgroups: their prefix, and the clean-up that removes them and nothing else.

Owns: the run id (``NRI_E2E_RUN_ID``, inherited by every process the run starts), the cgroup
prefix derived from it (``nri-e2e-<run id>``, one top-level directory per cgroup v1
hierarchy, and the same name below ``kubepods``: ``SHIPPED_PODS``), killing processes left in
this run's cgroups and removing those directories, and removing the empty directories of runs
that died without their clean-up (``sweep_dead_runs``).

Why two places: a policy server writes only beneath kubelet's pod hierarchy
(policy_server/node/pod_confinement.py). The e2e tests start theirs with
``--kubelet-cgroup-root=/<prefix>`` and put pods in ``/<prefix>/kubepods``; the as-shipped tests
run the shipped configuration unchanged (kubelet's default cgroup root ``/``), so their pods go
to ``/kubepods/<prefix>``. The ``kubepods`` directory itself is left in place: it is every run's
(and a real kubelet's), and removing it could race another run creating its pods there.

Must not: signal anything under another prefix, or remove another run's directories unless
that run's process is gone and its cgroups hold no process. ``make e2e`` and
``make shipped`` may run side by side on one machine (docs/e2e.md); each run's pods live under
its own prefix, so one run's clean-up can never kill the other's containers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import time
import uuid
from pathlib import Path

RUN_ID_ENV = "NRI_E2E_RUN_ID"
CGROUP_V1_ROOT = Path("/sys/fs/cgroup")
# kubelet's pod hierarchy below its default cgroup root (the cgroupfs driver).
KUBEPODS = "kubepods"
RMDIR_ATTEMPTS = 20
RMDIR_RETRY_S = 0.05
# A run id made by run_id(): "<pid of the run's pytest>-<6 hex digits>".
_DEFAULT_RUN_PREFIX = re.compile(r"nri-e2e-(\d+)-[0-9a-f]{6}")

log = logging.getLogger(__name__)


def run_id() -> str:
    """This run's id: set once per run (the pytest process) and inherited by its children."""
    return os.environ.setdefault(RUN_ID_ENV, f"{os.getpid()}-{uuid.uuid4().hex[:6]}")


def cgroup_prefix(run: str) -> str:
    """The top-level cgroup directory of run ``run``'s pods (``/nri-e2e-<run>/pod<uid>``)."""
    return f"nri-e2e-{run}"


def cgroup_trees(prefix: str, root: Path = CGROUP_V1_ROOT) -> list[Path]:
    """``prefix``'s directories in every hierarchy under ``root`` that has them: at the
    hierarchy's top and below its ``kubepods``."""
    return [
        d
        for h in sorted(root.iterdir())
        for d in (h / prefix, h / KUBEPODS / prefix)
        if d.is_dir()
    ]


def cgroup_pids(prefix: str, root: Path = CGROUP_V1_ROOT) -> set[int]:
    """The PIDs in ``prefix``'s cgroups, every hierarchy."""
    pids: set[int] = set()
    for tree in cgroup_trees(prefix, root):
        for procs in tree.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in procs.read_text().split())
    return pids


def kill_cgroup_processes(prefix: str, root: Path = CGROUP_V1_ROOT) -> set[int]:
    """SIGKILL the processes left in ``prefix``'s cgroups (only after a failed teardown);
    returns their PIDs."""
    pids = cgroup_pids(prefix, root)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def remove_cgroups(prefix: str, root: Path = CGROUP_V1_ROOT) -> None:
    """rmdir ``prefix``'s cgroup directories, deepest first (cgroupfs cannot rm -r)."""
    for tree in cgroup_trees(prefix, root):
        dirs = sorted((p for p in tree.rglob("*") if p.is_dir()), key=lambda p: len(p.parts))
        for d in [*reversed(dirs), tree]:
            for _ in range(RMDIR_ATTEMPTS):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(RMDIR_RETRY_S)  # processes may still be exiting


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # PermissionError: it exists, as another user's
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def sweep_dead_runs(root: Path = CGROUP_V1_ROOT) -> list[str]:
    """Remove what runs that died without their clean-up left: the prefixes of default run ids
    whose pytest process is gone and whose cgroups hold no process. A run id given by hand, a
    live run (or a PID reused since) and a prefix with a process in it are left alone.
    Returns the prefixes removed."""
    found: set[str] = set()
    for hierarchy in root.iterdir():
        for top in (hierarchy, hierarchy / KUBEPODS):
            with contextlib.suppress(OSError):
                names = [d.name for d in top.iterdir()]
                found.update(name for name in names if _DEFAULT_RUN_PREFIX.fullmatch(name))
    removed = []
    for prefix in sorted(found):
        match = _DEFAULT_RUN_PREFIX.fullmatch(prefix)
        assert match is not None
        if _alive(int(match.group(1))) or cgroup_pids(prefix, root):
            continue
        remove_cgroups(prefix, root)
        log.info("removed the cgroups a dead run left: /%s", prefix)
        removed.append(prefix)
    return removed


CGROUP_PREFIX = cgroup_prefix(run_id())
# This run's pods where a policy server with kubelet's default cgroup root may write (relative
# to a hierarchy's root, like CGROUP_PREFIX): the as-shipped tests'.
SHIPPED_PODS = f"{KUBEPODS}/{CGROUP_PREFIX}"
