"""Host directories (``HostDirectory``): made to exist with their mode, emptied if asked.

Owns creating a directory a container's mount needs (HAMi-core's per-container cache directory
is one), after removing what it holds when the effect says ``emptied``. Done once, at the
event: never re-applied by the reconciler (emptying a directory in use would take a running
container's files). Must not: touch a path that is not clean and absolute, or raise.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import PurePosixPath

from policy_server.node.execution import ApplyRun, ExecutorMode
from policy_server.sdk.effects import HostDirectory

log = logging.getLogger(__name__)


def make_directory(effect: HostDirectory, run: ApplyRun) -> None:
    """Create ``effect.path`` with ``effect.mode`` (in ``on`` mode; ``dry-run`` logs it)."""
    if run.mode is ExecutorMode.OFF:
        return
    report = run.report
    line = f"mkdir {effect.path} mode {effect.mode:o}"
    if not effect.path.startswith("/") or ".." in PurePosixPath(effect.path).parts:
        report.failed.append(f"{line}: not a clean absolute path")
        return
    if run.mode is ExecutorMode.DRY_RUN:
        report.logged.append(line)
        log.info("dry-run: would %s pod=%s %s", line, effect.pod, run.context)
        return
    try:
        if effect.emptied and os.path.isdir(effect.path) and not os.path.islink(effect.path):
            shutil.rmtree(effect.path)
        os.makedirs(effect.path, exist_ok=True)
        os.chmod(effect.path, effect.mode)  # makedirs is subject to the umask
    except OSError as exc:
        report.failed.append(f"{line}: {exc.strerror}")
        log.error("%s failed: %s pod=%s %s", line, exc.strerror, effect.pod, run.context)
        return
    report.written.append(line)
