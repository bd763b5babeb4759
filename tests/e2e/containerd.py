"""Run one private containerd instance: start, stop and restart it by PID.

Owns: the containerd process we start (and only that one), its log file, image
import with that build's own ``ctr``, and the final clean-up of everything it left
behind (shims serving our socket, container processes in our cgroup tree, mounts
under our private base directory, this run's cgroups: tests/e2e/cgroup_scope.py).

Must not: signal any process it did not start. Shims and containers count as ours
because they serve our private gRPC address / live in our private cgroup tree.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from tests.waiting import WaitTimeout, wait_until

from .cgroup_scope import CGROUP_PREFIX, kill_cgroup_processes, remove_cgroups, sweep_dead_runs
from .procs import scaled, stop_by_pid
from .runtimes import IMAGE_TARBALLS, InstanceDirs, Runtime, render_base_config, runtime_config_args

log = logging.getLogger(__name__)

START_TIMEOUT_S = scaled(30.0)
STOP_TIMEOUT_S = scaled(20.0)
CTR_TIMEOUT_S = scaled(60.0)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ContainerdError(RuntimeError):
    """containerd did not start, stop or answer as expected."""


class Containerd:
    """A containerd started by the tests, with a private config, root and sockets."""

    def __init__(self, runtime: Runtime, dirs: InstanceDirs) -> None:
        self.runtime = runtime
        self.dirs = dirs
        self._proc: subprocess.Popen[bytes] | None = None
        dirs.create()
        # NRI is turned on by the product's own command, as docs/runtime-config.md tells an
        # operator to: containerd starts from the file `runtime-config --write` produced.
        dirs.config.write_text(render_base_config(runtime, dirs))
        done = subprocess.run([sys.executable, "-m", "bridge", *runtime_config_args(runtime, dirs)],
                              capture_output=True, text=True, timeout=CTR_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise ContainerdError(f"runtime-config failed ({done.returncode}): {done.stderr}")

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _env(self) -> dict[str, str]:
        # containerd finds containerd-shim-runc-v2 on PATH: this build's own shim first.
        env = dict(os.environ)
        env["PATH"] = f"{self.runtime.bin_dir}:{SYSTEM_PATH}"
        return env

    def start(self) -> None:
        if self.running():
            raise ContainerdError("containerd already running")
        for stale in (self.dirs.address, self.dirs.nri_socket):
            stale.unlink(missing_ok=True)
        sweep_dead_runs()  # what a run that died without its clean-up left (empty cgroups)
        with self.dirs.log.open("ab") as out:
            out.write(f"==== e2e: starting containerd {self.runtime.version} ====\n".encode())
            out.flush()
            self._proc = subprocess.Popen(
                [
                    str(self.runtime.containerd),
                    "--config",
                    str(self.dirs.config),
                    "--log-level",
                    "debug",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,
            )
        def sockets() -> str:
            return (f"gRPC socket {self.dirs.address.exists()}, NRI socket "
                    f"{self.dirs.nri_socket.exists()}; log tail:\n{self.log_tail()}")
        try:
            wait_until(lambda: self.dirs.address.exists() and self.dirs.nri_socket.exists(),
                       what=f"containerd {self.runtime.version} makes its gRPC and NRI sockets",
                       timeout_s=START_TIMEOUT_S, proc=self._proc, details=sockets)
        except WaitTimeout as exc:
            raise ContainerdError(str(exc)) from None
        self.ctr("version")

    def stop(self) -> None:
        """SIGTERM our containerd by PID; SIGKILL it if it does not exit in time."""
        proc, self._proc = self._proc, None
        if stop_by_pid(proc, STOP_TIMEOUT_S) and proc is not None:
            log.warning("containerd pid %d ignored SIGTERM; it was killed", proc.pid)

    def kill(self) -> None:
        """SIGKILL our containerd by PID at once: a wedged one (its NRI locks held in a cycle)
        need not act on SIGTERM, and every CRI call on it would wait out its deadline."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)

    def restart(self) -> None:
        self.stop()
        self.start()

    def ctr(self, *args: str, timeout_s: float = CTR_TIMEOUT_S) -> str:
        cmd = [str(self.runtime.ctr), "--address", str(self.dirs.address), "-n", "k8s.io", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise ContainerdError(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
        return done.stdout

    def import_images(self) -> None:
        for tarball in IMAGE_TARBALLS:
            if not tarball.is_file():
                raise ContainerdError(
                    f"{tarball} missing: run tests/e2e/setup/install-runtimes.sh first"
                )
            self.ctr("images", "import", str(tarball))

    def log_text(self) -> str:
        return self.dirs.log.read_text(errors="replace") if self.dirs.log.exists() else ""

    def log_size(self) -> int:
        return self.dirs.log.stat().st_size if self.dirs.log.exists() else 0

    def log_since(self, offset: int) -> str:
        with self.dirs.log.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    # ---- clean-up of leftovers: only things that belong to this instance ----

    def _our_shim_pids(self) -> list[int]:
        needle = str(self.dirs.address).encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"containerd-shim" in cmdline and needle in cmdline.split(b"\0"):
                pids.append(int(entry.name))
        return pids

    def _unmount_all(self) -> None:
        base = str(self.dirs.base)
        mounts = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                point = line.split()[4].replace("\\040", " ")
                if point == base or point.startswith(base + "/"):
                    mounts.append(point)
        for point in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)

    def cleanup(self) -> None:
        """Stop everything this instance started and delete its files. Never raises."""
        try:
            self.stop()
        except Exception:
            log.exception("stopping containerd failed")
        for pid in self._our_shim_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        kill_cgroup_processes(CGROUP_PREFIX)
        self._unmount_all()
        remove_cgroups(CGROUP_PREFIX)
        shutil.rmtree(self.dirs.base, ignore_errors=True)

