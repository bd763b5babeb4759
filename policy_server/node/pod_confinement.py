"""Where node writes may go: beneath the kubepods hierarchy, reached without following symlinks.

Owns the pod hierarchy of one node (``PodHierarchy``: kubelet's ``--cgroup-root``, below which
kubelet keeps ``kubepods`` with the cgroupfs driver, and ``kubepods.slice`` with the systemd
driver), the check that a cgroup directory a request, a policy or the bridge's state names lies
beneath it (``confined``, raising ``ConfinementError`` with the path and the reason), and
opening a file below a trusted base directory one component at a time with ``O_NOFOLLOW``
(``open_beneath``, ``is_dir_beneath``).

Why ``openat`` per component rather than ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)``:
Python's ``os`` has no ``openat2`` (it would be a raw syscall through ctypes, Linux >= 5.6
only, and seccomp profiles of older runtimes refuse it with ENOSYS/EPERM); ``os.open`` with
``dir_fd`` and ``O_NOFOLLOW`` works on every kernel the product supports. The relative path is
checked first (no ``..``, no empty, ``.``, NUL or control-character components), so walking it
component by component from an ``O_PATH | O_DIRECTORY`` descriptor of the base, each opened with
``O_NOFOLLOW``, cannot leave the base: a symlink fails the walk with ELOOP/ENOTDIR. The base
itself (``--cgroup-root``, ``<root>/<v1 controller>``: on cgroup v1 ``cpu`` is often a symlink to
``cpu,cpuacct``) is configuration, opened normally.

Must not: write anything itself, trust a path it did not check, or follow a symlink below the
base.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from bridge.contract import systemd_slice

# kubelet's pod hierarchy below its --cgroup-root: cgroupfs driver, systemd driver.
KUBEPODS = "kubepods"
KUBEPODS_SLICE = "kubepods.slice"
# kubelet's default --cgroup-root.
DEFAULT_KUBELET_CGROUP_ROOT = "/"

_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ConfinementError(ValueError):
    """A cgroup path outside the pod hierarchy, or one that cannot be checked."""


def _bad_component(name: str) -> str | None:
    if name in ("", ".", ".."):
        return f"component {name!r}"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        return "a control character"
    return None


def clean_components(rel: str) -> tuple[str, ...]:
    """``rel`` split into components; ``ConfinementError`` for ``..``, ``.``, empty ones (a
    leading ``/`` aside), NUL or control characters."""
    names = rel.strip("/").split("/") if rel.strip("/") else []
    for name in names:
        why = _bad_component(name)
        if why is not None:
            raise ConfinementError(f"cgroup path {rel!r}: {why}")
    return tuple(names)


@dataclass(frozen=True, slots=True)
class PodHierarchy:
    """kubelet's ``--cgroup-root`` (``/`` by default) as components below the cgroup root."""

    kubelet_root: tuple[str, ...] = ()

    @classmethod
    def of(cls, kubelet_cgroup_root: str) -> PodHierarchy:
        """From the text of ``--kubelet-cgroup-root`` (an absolute cgroup path)."""
        if not kubelet_cgroup_root.startswith("/"):
            raise ConfinementError(
                f"kubelet cgroup root {kubelet_cgroup_root!r}: expected an absolute cgroup path"
            )
        return cls(clean_components(kubelet_cgroup_root))

    @property
    def roots(self) -> tuple[str, ...]:
        """The pod hierarchies' directories relative to a cgroup hierarchy root."""
        base = "/".join(self.kubelet_root)
        return (f"{base}/{KUBEPODS}" if base else KUBEPODS, KUBEPODS_SLICE)

    def confined(self, rel: str, what: str = "cgroup") -> tuple[str, ...]:
        """``rel`` (a directory relative to a hierarchy root, as ``cgroup_layout`` makes it)
        as components, if it is the pod hierarchy or beneath it; else ``ConfinementError``
        naming ``what`` and the path.

        cgroupfs: ``<kubelet root>/kubepods[/...]``. systemd: ``kubepods.slice`` and slices
        below it whose every level is ``kubepods-...`` (the expansion of a kubepods slice name)."""
        names = clean_components(rel)
        root = self.kubelet_root
        if names[: len(root) + 1] == (*root, KUBEPODS):
            return names
        if names[:1] == (KUBEPODS_SLICE,) and systemd_slice.is_slice_path(
            [n for n in names if n.endswith(systemd_slice.SLICE_SUFFIX)]
        ):
            slices = [n for n in names if n.endswith(systemd_slice.SLICE_SUFFIX)]
            # Slices first, then at most one scope (a container) and the runtime's nesting.
            if list(names[: len(slices)]) == slices and all(
                n == KUBEPODS_SLICE or n.startswith(KUBEPODS + "-") for n in slices
            ):
                return names
        raise ConfinementError(
            f"{what} {'/' + '/'.join(names)!r} is outside the pod hierarchy "
            f"(/{' or /'.join(self.roots)})"
        )

    def container(self, rel: str, pod_uid: str | None = None) -> tuple[str, ...]:
        """A container's directory: ``confined``, and at least a pod level and a container
        level below the kubepods directory (``kubepods/pod<uid>/<id>``,
        ``kubepods.slice/kubepods-pod<uid>.slice/<scope>``); with ``pod_uid``, one level must be
        that pod's (``pod<uid>``, or a slice ending ``-pod<uid>.slice`` with ``-`` as ``_``)."""
        names = self.confined(rel, "container cgroups_path")
        top = len(self.kubelet_root) + 1 if names[0] != KUBEPODS_SLICE else 1
        shown = "/" + "/".join(names)
        if len(names) < top + 2:
            raise ConfinementError(
                f"container cgroups_path {shown!r} is not a container's cgroup below a pod's"
            )
        if pod_uid:
            levels = {f"pod{pod_uid}", f"pod{pod_uid.replace('-', '_')}"}
            if not any(
                n in levels or any(n.endswith(f"-{lv}.slice") for lv in levels) for n in names
            ):
                raise ConfinementError(
                    f"container cgroups_path {shown!r} is not below pod {pod_uid}'s cgroup"
                )
        return names


@contextmanager
def _walk(base: str, names: Sequence[str]) -> Iterator[int]:
    """An ``O_PATH`` descriptor of ``base/names...``, each component opened with
    ``O_NOFOLLOW`` (``OSError`` if one is missing, a symlink or not a directory)."""
    fd = os.open(base, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in names:
            nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def open_beneath(base: str, names: Sequence[str], file: str, flags: int) -> int:
    """A descriptor of ``base/names.../file`` opened with ``flags`` (never ``O_CREAT``), no
    symlink below ``base`` followed: ``OSError`` (ELOOP, ENOTDIR, ENOENT...) otherwise. The
    caller closes it."""
    why = _bad_component(file)
    if why is not None or "/" in file:
        raise ConfinementError(f"cgroup file {file!r}: {why or 'a path'}")
    with _walk(base, names) as fd:
        return os.open(file, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)


def read_beneath(base: str, names: Sequence[str], file: str) -> str | None:
    """The file's text without the ends' white space; None if unreadable or reached only
    through a symlink."""
    try:
        fd = open_beneath(base, names, file, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def write_beneath(base: str, names: Sequence[str], file: str, text: str) -> None:
    """Write ``text`` into an existing file (``O_WRONLY | O_TRUNC``); raises ``OSError``."""
    fd = open_beneath(base, names, file, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def is_dir_beneath(base: str, names: Sequence[str]) -> bool:
    """Whether ``base/names...`` is a directory reached without a symlink."""
    try:
        with _walk(base, names):
            return True
    except OSError:
        return False
