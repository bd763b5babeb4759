"""Whether a path on the node may be trusted, and reading a file only when it may.

Both programs run as root and act on what they read: a config or rules file another user can
write is that user's root, a token file that user can swap for a symlink sends any root-only
file as a header, a socket that user put at a policy's path receives every container's
environment. Owns the one rule both programs apply to such paths (docs/security.md#files):

- every entry on the way to the file, each directory, every symlink followed and the file
  itself, is owned by root, by the running uid or (for a policy's socket) by a uid the
  configuration names (`owners`);
- no directory on the way is writable by others unless it has the sticky bit (then nobody
  else can rename or remove our entries in it) or sits on a read-only mount (Kubernetes
  ConfigMap and Secret volumes: their top directory is 0777, mounted read-only); none is
  writable by a group other than root's or the running gid;
- the file itself is writable by nobody but its owner (and those groups).

The path is walked one component at a time from `/`, each opened relative to the directory
before it with O_NOFOLLOW (`O_PATH`) and checked on its open descriptor; a symlink is followed
only after its own entry passed, so a Kubernetes volume's `..data` links resolve while a link
another user planted does not. `read_trusted` opens the last component the same way
(O_NOFOLLOW, relative to the checked directory) and checks the descriptor it reads: nothing is
looked up twice by name, so nothing can be swapped between the check and the read.

Standard library only, like bridge.process_setup; must not log or know what the files hold.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import socket
import stat
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MAX_SYMLINKS = 40  # as the kernel's own lookup (ELOOP)
MAX_FILE_BYTES = 4 << 20  # config, rules, tokens, keys: far smaller than this
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class UntrustedPath(Exception):
    """The path cannot be trusted (or read); `path` is the entry at fault, `problem` why."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def default_owners(extra: Iterable[int] = ()) -> frozenset[int]:
    """Root, the running uid and `extra`."""
    return frozenset({0, os.geteuid(), *extra})


def user_name(uid: int) -> str:
    """`uid 1001 (nwb-attacker)`, or `uid 1001` for a uid without a name."""
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _owners_text(owners: frozenset[int]) -> str:
    return ", ".join(user_name(u) for u in sorted(owners))


def _read_only(fd: int) -> bool:
    try:
        return bool(os.fstatvfs(fd).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _check_owner(path: str, st: os.stat_result, owners: frozenset[int]) -> None:
    if st.st_uid not in owners:
        raise UntrustedPath(path, f"owned by {user_name(st.st_uid)}, not by "
                                  f"{_owners_text(owners)}")


def _check_writers(path: str, st: os.stat_result, fd: int, *, directory: bool) -> None:
    """Nobody but the owner (and root's or our group) may change what is at `path`."""
    mode = st.st_mode
    if not mode & (stat.S_IWGRP | stat.S_IWOTH):
        return
    if directory and mode & stat.S_ISVTX:
        return  # sticky: others may add names, never rename or remove ours
    if _read_only(fd):
        return  # a read-only mount: the mode says more than anyone can do
    who = "others" if mode & stat.S_IWOTH else f"group {st.st_gid}"
    kind = "directory" if directory else "file"
    raise UntrustedPath(path, f"{kind} writable by {who} (mode {stat.S_IMODE(mode):04o})")


@dataclass(frozen=True, slots=True)
class _Last:
    """The last component of a walked path: its directory (an O_PATH fd), name and status."""

    dir_fd: int
    name: str
    path: str  # the resolved path, for messages
    st: os.stat_result | None  # None: nothing there (allowed only with missing_ok)


def _components(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


@contextlib.contextmanager
def _walk(path: str, owners: frozenset[int], *, missing_ok: bool = False) -> Iterator[_Last]:
    """Walk `path` (absolute or relative to the working directory) checking every directory
    and every symlink on the way; yields its last component, not yet checked as a file."""
    if not path:
        raise UntrustedPath(path, "empty path")
    absolute = path if path.startswith("/") else os.path.join(os.getcwd(), path)
    fds: list[tuple[int, str]] = []  # the directories walked so far: (O_PATH fd, real path)

    def push_root() -> None:
        for fd, _ in fds:
            os.close(fd)
        fds.clear()
        fd = os.open("/", _PATH_FLAGS | os.O_DIRECTORY)
        fds.append((fd, "/"))
        check_dir(fd, "/")

    def check_dir(fd: int, where: str) -> None:
        st = os.fstat(fd)
        _check_owner(where, st, owners)
        _check_writers(where, st, fd, directory=True)

    try:
        push_root()
        todo = _components(absolute)
        links = 0
        while todo:
            name = todo.pop(0)
            cur_fd, cur_path = fds[-1]
            if name == "..":
                if len(fds) > 1:
                    os.close(fds.pop()[0])
                continue
            where = os.path.join(cur_path, name)
            try:
                fd = os.open(name, _PATH_FLAGS, dir_fd=cur_fd)
            except FileNotFoundError:
                if not todo and missing_ok:
                    yield _Last(cur_fd, name, where, None)
                    return
                raise UntrustedPath(where, "does not exist") from None
            except OSError as exc:
                raise UntrustedPath(where, f"cannot open: {exc.strerror}") from None
            st = os.fstat(fd)
            if stat.S_ISLNK(st.st_mode):
                os.close(fd)
                _check_owner(where, st, owners)  # a link another user made is not followed
                links += 1
                if links > MAX_SYMLINKS:
                    raise UntrustedPath(path, "too many levels of symbolic links")
                target = os.readlink(name, dir_fd=cur_fd)
                if target.startswith("/"):
                    push_root()
                todo[:0] = _components(target)
                continue
            if not todo:
                os.close(fd)
                yield _Last(cur_fd, name, where, st)
                return
            if not stat.S_ISDIR(st.st_mode):
                os.close(fd)
                raise UntrustedPath(where, "not a directory")
            fds.append((fd, where))
            check_dir(fd, where)
        # The path ended in a directory already walked (`/`, or `..` last): "." of its fd.
        yield _Last(fds[-1][0], ".", fds[-1][1], os.fstat(fds[-1][0]))
    finally:
        for fd, _ in fds:
            os.close(fd)


def _check_last(last: _Last, owners: frozenset[int], *, directory: bool) -> str:
    assert last.st is not None
    if directory != stat.S_ISDIR(last.st.st_mode) or not (
            directory or stat.S_ISREG(last.st.st_mode)):
        raise UntrustedPath(last.path, "not a directory" if directory else "not a regular file")
    _check_owner(last.path, last.st, owners)
    fd = os.open(last.name, _PATH_FLAGS, dir_fd=last.dir_fd)
    try:
        _check_writers(last.path, last.st, fd, directory=directory)
    finally:
        os.close(fd)
    return last.path


def check_file(path: str, owners: frozenset[int] | None = None) -> str:
    """Raises UntrustedPath unless `path` is a regular file we may trust; its resolved path."""
    owners = owners or default_owners()
    with _walk(path, owners) as last:
        return _check_last(last, owners, directory=False)


def check_directory(path: str, owners: frozenset[int] | None = None) -> str:
    """Raises UntrustedPath unless `path` is a directory we may trust (every entry on the way
    checked); its resolved path."""
    owners = owners or default_owners()
    with _walk(path, owners) as last:
        return _check_last(last, owners, directory=True)


def read_trusted(path: str, owners: frozenset[int] | None = None,
                 limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of `path` if it may be trusted (see the module); else UntrustedPath. The file
    is opened O_NOFOLLOW relative to its checked directory and checked on the descriptor read."""
    owners = owners or default_owners()
    with _walk(path, owners) as last:
        try:
            fd = os.open(last.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                         dir_fd=last.dir_fd)
        except OSError as exc:
            raise UntrustedPath(last.path, f"cannot open: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UntrustedPath(last.path, "not a regular file")
            _check_owner(last.path, st, owners)
            _check_writers(last.path, st, fd, directory=False)
            if st.st_size > limit:
                raise UntrustedPath(last.path, f"larger than {limit} bytes")
            chunks = []
            total = 0
            while chunk := os.read(fd, 65536):
                total += len(chunk)
                if total > limit:
                    raise UntrustedPath(last.path, f"larger than {limit} bytes")
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError as exc:
            raise UntrustedPath(last.path, f"cannot read: {exc.strerror}") from None
        finally:
            os.close(fd)


def check_socket_path(path: str, owners: frozenset[int] | None = None, *,
                      take_directory: bool = False) -> bool:
    """Raises UntrustedPath unless the socket at `path` may be used: its directory passes the
    rule and whatever is at `path` (if anything) is owned by one of `owners`. True if a socket
    is there.

    With `take_directory` (a listener's socket directory, or a policy socket's that the
    deploy shares with it), a directory owned by us that its group or others may write
    without the sticky bit (a Kubernetes emptyDir is 0777, 2777 with an fsGroup) has that
    write permission removed first: it is ours, and what is already at `path` is still
    checked. A directory that does not exist yet is left to whoever creates it; the
    directories above it are checked."""
    owners = owners or default_owners()
    directory = os.path.dirname(os.path.abspath(path))
    if take_directory:
        take_socket_directory(directory, owners)
    existing = directory
    while not os.path.isdir(existing):
        existing = os.path.dirname(existing)
    if existing != directory:
        check_directory(existing, owners)
        return False
    with _walk(path, owners, missing_ok=True) as last:
        if last.st is None:
            return False
        _check_owner(last.path, last.st, owners)
        return stat.S_ISSOCK(last.st.st_mode)


def take_socket_directory(directory: str, owners: frozenset[int]) -> bool:
    """Remove group and others' write permission from `directory` if it is owned by the
    running uid and writable by them without the sticky bit; True if it was changed. A missing
    directory is left to whoever creates it."""
    try:
        st = os.lstat(directory)
    except OSError:
        return False
    writers = stat.S_IWGRP | stat.S_IWOTH
    if (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and st.st_uid in owners
            and st.st_mode & writers and not st.st_mode & stat.S_ISVTX):
        with contextlib.suppress(OSError):
            os.chmod(directory, stat.S_IMODE(st.st_mode) & ~writers)
            return True
    return False


def peer_ucred(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket, as the
    kernel recorded them when it connected (SO_PEERCRED); the one reader of both programs."""
    pid, uid, gid = _PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    return pid, uid, gid


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED)."""
    return peer_ucred(sock)[1]
