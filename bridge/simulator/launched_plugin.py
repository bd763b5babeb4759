"""Starting a pre-registered plugin the way the runtime does (docs/protocol.md#launched-plugins).

Owns the process side of a launched plugin: the plugin's end of a socketpair becomes its fd 3;
its environment is exactly NRI_PLUGIN_NAME, NRI_PLUGIN_IDX and NRI_PLUGIN_SOCKET=3; stdin,
stdout and stderr are /dev/null. Must not: speak the protocol on the runtime's end (the
runtime serves it as it serves a plugin that connected: bridge.simulator.plugin_start).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Sequence


def spawn_plugin(argv: Sequence[str], name: str,
                 index: str) -> tuple[socket.socket, subprocess.Popen[bytes]]:
    """(the runtime's end of the connection, the plugin's process)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = theirs.fileno()
    try:
        proc = subprocess.Popen(
            list(argv), env={"NRI_PLUGIN_NAME": name, "NRI_PLUGIN_IDX": index,
                             "NRI_PLUGIN_SOCKET": "3"},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3,), preexec_fn=lambda: os.dup2(fd, 3))
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return ours, proc
