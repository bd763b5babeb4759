"""The node's file rule (bridge.file_trust), each check shown passing a good input and
refusing the same input mutated: a mode bit, an owner, a sticky bit, a symlink's owner.

Owners are changed to a uid nobody has (no second user is needed to own a file); where the
tests do not run as root they cannot chown, and those cases skip with the reason printed.
"""

from __future__ import annotations

import os
import socket
import stat
import sys
from pathlib import Path

import pytest

from bridge import file_trust
from bridge.file_trust import UntrustedPath

STRANGER = 54321  # a uid that is neither root nor us


def _need_root() -> None:
    if os.geteuid() != 0:
        reason = "changing a file's owner needs root"
        print(f"SKIP: {reason}", file=sys.stderr)
        pytest.skip(reason)


@pytest.fixture
def safe(tmp_path: Path) -> Path:
    d = tmp_path / "safe"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    return d


def _file(d: Path, name: str = "f", mode: int = 0o644, text: str = "x") -> Path:
    path = d / name
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(("mode", "problem"), [
    (0o644, None), (0o600, None), (0o444, None), (0o640, None),
    (0o664, "file writable by group"), (0o666, "file writable by others"),
    (0o646, "file writable by others"), (0o620, "file writable by group"),
])
def test_a_file_writable_by_group_or_others_is_refused(safe: Path, mode: int,
                                                       problem: str | None) -> None:
    path = _file(safe, mode=mode, text="token")
    if problem is None:
        assert file_trust.check_file(str(path)) == str(path)
        assert file_trust.read_trusted(str(path)) == b"token"
        return
    for check in (file_trust.check_file, file_trust.read_trusted):
        with pytest.raises(UntrustedPath) as caught:
            check(str(path))
        assert caught.value.path == str(path)
        assert problem in caught.value.problem and f"{mode:04o}" in caught.value.problem


def test_a_file_owned_by_another_uid_is_refused(safe: Path) -> None:
    _need_root()
    path = _file(safe)
    assert file_trust.read_trusted(str(path)) == b"x"  # ours: fine
    os.chown(path, STRANGER, -1)
    with pytest.raises(UntrustedPath, match=f"owned by uid {STRANGER}, not by uid 0"):
        file_trust.read_trusted(str(path))
    # ... unless the caller trusts that uid (a policy server's peer_uids)
    assert file_trust.check_file(str(path), file_trust.default_owners([STRANGER]))


@pytest.mark.parametrize(("mode", "ok"), [
    (0o755, True), (0o750, True), (0o1777, True), (0o1770, True),
    (0o775, False), (0o777, False), (0o757, False),
])
def test_a_directory_on_the_way_must_be_closed_or_sticky(safe: Path, mode: int,
                                                         ok: bool) -> None:
    d = safe / "d"
    d.mkdir()
    path = _file(d)
    d.chmod(mode)
    if ok:
        assert file_trust.read_trusted(str(path)) == b"x"
    else:
        with pytest.raises(UntrustedPath, match="directory writable by") as caught:
            file_trust.read_trusted(str(path))
        assert caught.value.path == str(d)


def test_in_a_sticky_directory_the_file_must_still_be_ours(safe: Path) -> None:
    _need_root()
    d = safe / "tmp"
    d.mkdir()
    d.chmod(0o1777)
    path = _file(d)
    assert file_trust.read_trusted(str(path)) == b"x"
    os.chown(path, STRANGER, -1)
    with pytest.raises(UntrustedPath, match=f"owned by uid {STRANGER}"):
        file_trust.read_trusted(str(path))


def test_a_directory_owned_by_another_uid_is_refused(safe: Path) -> None:
    _need_root()
    d = safe / "theirs"
    d.mkdir()
    path = _file(d)
    os.chown(d, STRANGER, -1)
    with pytest.raises(UntrustedPath, match=f"owned by uid {STRANGER}") as caught:
        file_trust.check_file(str(path))
    assert caught.value.path == str(d)


def test_symlinks_of_ours_are_followed_like_a_kubernetes_volume(safe: Path) -> None:
    # A ConfigMap or Secret volume: config.yaml -> ..data/config.yaml, ..data -> ..2026_x
    volume = safe / "volume"
    (volume / "..2026_12_01").mkdir(parents=True)
    _file(volume / "..2026_12_01", "config.yaml", text="webhooks: []\n")
    (volume / "..data").symlink_to("..2026_12_01")
    (volume / "config.yaml").symlink_to("..data/config.yaml")
    assert file_trust.read_trusted(str(volume / "config.yaml")) == b"webhooks: []\n"
    assert file_trust.check_file(str(volume / "config.yaml")) == str(
        volume / "..2026_12_01" / "config.yaml")
    # an absolute link and a .. on the way resolve the same
    (safe / "abs").symlink_to(volume / "..data" / "config.yaml")
    assert file_trust.read_trusted(str(safe / "abs")) == b"webhooks: []\n"
    assert file_trust.read_trusted(f"{volume}/..data/../config.yaml") == b"webhooks: []\n"


def test_a_symlink_another_uid_planted_is_not_followed(safe: Path) -> None:
    _need_root()
    private = safe / "private"
    private.mkdir(mode=0o700)
    secret = _file(private, "secret", mode=0o600, text="ROOT-ONLY")
    shared = safe / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    link = shared / "token"
    link.symlink_to(secret)
    assert file_trust.read_trusted(str(link)) == b"ROOT-ONLY"  # a link of ours: followed
    os.lchown(link, STRANGER, -1)
    with pytest.raises(UntrustedPath, match=f"owned by uid {STRANGER}") as caught:
        file_trust.read_trusted(str(link))
    assert caught.value.path == str(link)


def test_what_is_not_a_regular_file_is_refused(safe: Path) -> None:
    os.mkfifo(safe / "fifo")  # would block an ordinary open
    with pytest.raises(UntrustedPath, match="not a regular file"):
        file_trust.read_trusted(str(safe / "fifo"))
    with pytest.raises(UntrustedPath, match="not a regular file"):
        file_trust.check_file(str(safe))
    with pytest.raises(UntrustedPath, match="does not exist"):
        file_trust.read_trusted(str(safe / "missing"))
    _file(safe, "plain")
    with pytest.raises(UntrustedPath, match="not a directory"):
        file_trust.read_trusted(str(safe / "plain" / "below"))


def test_a_symlink_loop_is_refused(safe: Path) -> None:
    (safe / "a").symlink_to("b")
    (safe / "b").symlink_to("a")
    with pytest.raises(UntrustedPath, match="too many levels"):
        file_trust.read_trusted(str(safe / "a"))


def test_a_file_larger_than_the_limit_is_refused(safe: Path) -> None:
    path = _file(safe, text="x" * 100)
    assert file_trust.read_trusted(str(path), limit=100) == b"x" * 100
    with pytest.raises(UntrustedPath, match="larger than 99 bytes"):
        file_trust.read_trusted(str(path), limit=99)


def test_socket_paths(safe: Path) -> None:
    _need_root()
    # Nothing there yet, in a directory that does not exist yet: the ancestors are checked.
    assert file_trust.check_socket_path(str(safe / "run" / "p.sock")) is False
    open_dir = safe / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(UntrustedPath, match="directory writable by others"):
        file_trust.check_socket_path(str(open_dir / "missing" / "p.sock"))
    # A socket of ours is fine; another uid's at the path is refused, naming it and its owner.
    sticky = safe / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sticky / "p.sock"))
    try:
        assert file_trust.check_socket_path(str(sticky / "p.sock")) is True
        os.chown(sticky / "p.sock", STRANGER, -1)
        with pytest.raises(UntrustedPath, match=f"owned by uid {STRANGER}") as caught:
            file_trust.check_socket_path(str(sticky / "p.sock"))
        assert caught.value.path == str(sticky / "p.sock")
        assert file_trust.check_socket_path(str(sticky / "p.sock"),
                                            file_trust.default_owners([STRANGER]))
    finally:
        server.close()


def test_a_socket_directory_of_ours_that_others_may_write_is_taken(safe: Path) -> None:
    # A Kubernetes emptyDir is 0777 (2777 with an fsGroup): ours, so others lose write.
    d = safe / "empty-dir"
    d.mkdir()
    d.chmod(0o2777)
    with pytest.raises(UntrustedPath, match="directory writable by others"):
        file_trust.check_socket_path(str(d / "p.sock"))  # without taking it: refused
    assert stat.S_IMODE(d.stat().st_mode) == 0o2777  # and left as it was
    assert file_trust.check_socket_path(str(d / "p.sock"), take_directory=True) is False
    assert stat.S_IMODE(d.stat().st_mode) == 0o2755
    # sticky or closed directories are left alone
    d.chmod(0o1777)
    assert file_trust.take_socket_directory(str(d), file_trust.default_owners()) is False
    assert stat.S_IMODE(d.stat().st_mode) == 0o1777


def test_a_socket_directory_of_another_uid_is_not_taken(safe: Path) -> None:
    _need_root()
    d = safe / "theirs"
    d.mkdir()
    d.chmod(0o777)
    os.chown(d, STRANGER, -1)
    with pytest.raises(UntrustedPath, match=f"owned by uid {STRANGER}"):
        file_trust.check_socket_path(str(d / "p.sock"), take_directory=True)
    assert stat.S_IMODE(d.stat().st_mode) == 0o777


def test_peer_uid_is_the_other_end_of_the_socket() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert file_trust.peer_uid(a) == os.geteuid()


def test_user_names() -> None:
    assert file_trust.user_name(0) == "uid 0 (root)"
    assert file_trust.user_name(STRANGER) == f"uid {STRANGER}"
