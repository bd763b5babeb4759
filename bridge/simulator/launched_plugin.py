"""Starting a pre-registered plugin the way the runtime does (docs/protocol.md#launched-plugins).

Owns the process side of a launched plugin: the plugin's end of a socketpair becomes its fd 3,
and no other fd beyond stdio is passed on; its environment is exactly NRI_PLUGIN_NAME,
NRI_PLUGIN_IDX and NRI_PLUGIN_SOCKET=3; stdin, stdout and stderr are /dev/null. Must not: speak
the protocol on the runtime's end (the runtime serves it as it serves a plugin that connected:
bridge.simulator.plugin_start).

The process is started with posix_spawn and its file actions, never with Python code between
fork and exec (subprocess's preexec_fn): the simulator's process has gRPC's threads, and a child
forked while one of them holds a lock can hang before exec (a CI run lost a launched bridge that
way: it never registered and printed nothing).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence

_DEVNULL = "/dev/null"
_POLL_S = 0.01


class PluginProcess:
    """A launched plugin's process: what a caller of subprocess.Popen uses of it (pid, poll,
    wait, kill, returncode). The caller reaps it through poll or wait."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code, or None while the process runs."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Block until the process exits; subprocess.TimeoutExpired after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(_POLL_S)
        return code

    def kill(self) -> None:
        """SIGKILL, unless the process has been reaped already."""
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


def _inherited_fds() -> list[int]:
    """This process's fds that an exec would pass on: what our parent left open without
    close-on-exec (Python opens every fd with it). The runtime's plugin gets fds 0-3 only (Go's
    exec.Cmd passes ExtraFiles and nothing else), as subprocess's close_fds does."""
    inherited = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.get_inheritable(int(name)):
                inherited.append(int(name))
        except OSError:
            continue  # listdir's own fd, or one another thread closed since
    return inherited


def spawn_plugin(argv: Sequence[str], name: str,
                 index: str) -> tuple[socket.socket, PluginProcess]:
    """(the runtime's end of the connection, the plugin's process)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, _DEVNULL, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, _DEVNULL, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, _DEVNULL, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_DUP2, theirs.fileno(), 3),  # dup2 clears close-on-exec on fd 3
        *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited_fds() if fd > 3),
    ]
    env = {"NRI_PLUGIN_NAME": name, "NRI_PLUGIN_IDX": index, "NRI_PLUGIN_SOCKET": "3"}
    try:
        pid = os.posix_spawnp(argv[0], list(argv), env, file_actions=actions)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return ours, PluginProcess(pid)
