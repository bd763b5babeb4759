"""containerd's goroutine dump: ask for it, keep it, and pick out its NRI goroutines.

Owns: sending SIGUSR1 to the containerd a test started (by its PID), finding the file the dump
went to, moving it beside the other kept logs, and condensing the goroutines that sit in
containerd's NRI code (``(*local)`` in containerd, ``(*Adaptation)`` in the NRI module) into a
few lines a failure message can carry.

Must not: judge what the dump means (the test does), or signal a process it did not start.

containerd 1.7.24 and 2.1.9 handle SIGUSR1 alike (``cmd/containerd/command/main.go``,
``dumpStacks(true)``): the stacks of all goroutines go into the log between ``=== BEGIN
goroutine stack dump ===`` and ``=== END goroutine stack dump ===``, and into
``os.TempDir()/containerd.<pid>.stacks.log``, after which it logs ``goroutine stack dump
written to <path>``. The file is what is kept: the log line escapes the newlines.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from tests.waiting import wait_until

from .containerd import Containerd
from .procs import scaled

DUMP_TIMEOUT_S = scaled(15.0)
WRITTEN_RE = re.compile(r"goroutine stack dump written to (\S+?)\"?$", re.MULTILINE)
# Frames naming containerd's NRI glue or the NRI adaptation: both sides of the lock cycle.
NRI_FRAME_RE = re.compile(r"nri\.\(\*local\)\.\w+|adaptation\.\(\*Adaptation\)\.\w+")
FRAMES_PER_GOROUTINE = 8


@dataclass(frozen=True, slots=True)
class GoroutineDump:
    path: Path
    nri_goroutines: tuple[str, ...]  # one condensed line per goroutine in NRI code

    def lock_cycle(self) -> tuple[str, str] | None:
        """The two goroutines of issue 32's cycle, if both are there: a plugin's update
        holding the Adaptation mutex and waiting for containerd's (``updateFromPlugin``), and
        a caller holding containerd's and waiting in an Adaptation method."""
        updating = [g for g in self.nri_goroutines if ".updateFromPlugin" in g]
        holding = [g for g in self.nri_goroutines
                   if g.partition("]: ")[2].startswith("adaptation.(*Adaptation).")
                   and "nri.(*local)." in g]
        return (updating[0], holding[0]) if updating and holding else None

    def excerpt(self, limit: int = 12) -> str:
        shown = self.nri_goroutines[:limit]
        more = len(self.nri_goroutines) - len(shown)
        lines = [f"goroutine dump: {self.path} ({len(self.nri_goroutines)} goroutines in NRI code)"]
        cycle = self.lock_cycle() or ()
        if cycle:
            lines += ["lock cycle:", *(f"  {g}" for g in cycle), "other goroutines in NRI code:"]
        lines += [f"  {line}" for line in shown if line not in cycle]
        if more:
            lines.append(f"  ... {more} more")
        return "\n".join(lines)


def nri_goroutines(text: str) -> tuple[str, ...]:
    """Each goroutine whose stack passes through NRI code, as its header (``goroutine N [wait
    reason, minutes]``) and its NRI frames, innermost first (``frame <- caller <- ...``).

    A Go dump is blocks separated by blank lines: ``goroutine N [state, minutes]:``, then per
    frame a function line and a tab-indented ``file:line`` line (innermost first).
    """
    out = []
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        if not lines or not lines[0].startswith("goroutine "):
            continue
        frames: list[str] = []
        for line in lines[1:]:  # a closure (``.func1``) and ``created by`` repeat a name: once
            if (m := NRI_FRAME_RE.search(line)) and frames[-1:] != [m.group(0)]:
                frames.append(m.group(0))
        if not frames:
            continue
        out.append(f"{lines[0].rstrip(':')}: " + " <- ".join(frames[:FRAMES_PER_GOROUTINE]))
    return tuple(out)


def dump_goroutines(containerd: Containerd, keep_as: Path) -> GoroutineDump:
    """SIGUSR1 to ``containerd``; the dump moved to ``keep_as``, its NRI goroutines read."""
    pid = containerd.pid
    assert pid is not None and containerd.running(), "containerd is not running"
    offset = containerd.log_size()
    os.kill(pid, signal.SIGUSR1)
    match = wait_until(lambda: WRITTEN_RE.search(containerd.log_since(offset)),
                       what=f"containerd {pid} writes its goroutine dump",
                       timeout_s=DUMP_TIMEOUT_S, interval_s=0.1,
                       details=lambda: containerd.log_tail(10))
    keep_as.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(match.group(1), keep_as)
    return GoroutineDump(keep_as, nri_goroutines(keep_as.read_text(errors="replace")))
