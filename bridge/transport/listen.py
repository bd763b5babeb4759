"""Listening sockets for the bridge's control API and the policy server.

A Unix socket is created with its final mode: the umask is set for the bind, so
there is no moment in which it is more open than asked (uvicorn's own `uds=`
would chmod it 0666 afterwards). A stale socket file left by a previous run is
replaced; anything else at the path — a socket someone is listening on, a
regular file, a symlink — is refused and left untouched.

The file appears at its path only once it accepts connections: the socket is bound
to a temporary name beside it, listens, and is then renamed into place (rename(2)
is atomic within a directory, and a Unix socket is reached through whatever name
its inode has). A client that connects the moment the file appears — the bridge's
first event after the pair restarts, a readiness probe — is never refused, as it
was between bind and listen before.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat

BACKLOG = 128
SUN_PATH_MAX = 108  # bytes in sockaddr_un.sun_path, the terminating NUL included (Linux)


class ListenError(Exception):
    """The listener cannot be created; the message says why, naming the address."""


def _in_use(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(0.5)
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _staging_name(path: str) -> str:
    """A name beside `path` to bind before the rename; no longer than `path` if `path` is
    near the limit of a socket address (sun_path: 108 bytes with its NUL)."""
    head, base = os.path.split(path)
    staging = os.path.join(head, f".{base}.{os.getpid()}.tmp")
    if len(os.fsencode(staging)) < SUN_PATH_MAX or not base:
        return staging
    return os.path.join(head, ("#" if base[0] == "~" else "~") + base[1:])


def unix_listener(path: str, mode: int, dir_mode: int = 0o750) -> socket.socket:
    """A non-blocking listening Unix socket at `path`, created with `mode`."""
    os.makedirs(os.path.dirname(path) or ".", mode=dir_mode, exist_ok=True)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISLNK(st.st_mode):
            raise ListenError(f"{path} is a symlink (to {os.readlink(path)!r}), not a socket; "
                              "refusing to replace it or to follow it")
        if not stat.S_ISSOCK(st.st_mode):
            raise ListenError(f"{path} exists and is not a socket; refusing to replace it")
        if _in_use(path):
            raise ListenError(f"{path} is in use by another process")
        os.unlink(path)  # stale socket left by a previous run
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = _staging_name(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(staging)  # left by a process of ours that died between bind and rename
    old_umask = os.umask(0o777 & ~mode)
    try:
        sock.bind(staging)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot bind {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old_umask)
    try:
        os.chmod(staging, mode)
        sock.listen(BACKLOG)
        os.rename(staging, path)  # the file appears already accepting
    except OSError as exc:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise ListenError(f"cannot create {path}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock


def tcp_listener(host: str, port: int) -> socket.socket:
    """A non-blocking listening TCP socket on host:port (IPv6 if host has a colon)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock
