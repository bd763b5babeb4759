"""The listeners' token and TLS files go through the file rule (bridge.file_trust):
a file another user can write, or a link another user planted, is an error naming the path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bridge.listening.auth_files import load_token
from bridge.listening.listener_config import ListenerConfigError

NOBODY = 65534


def token_file(directory: Path, mode: int = 0o600) -> Path:
    path = directory / "token"
    path.write_bytes(b"  s3cret-token\n")
    path.chmod(mode)
    return path


def test_a_token_only_its_owner_may_write_is_read_and_stripped(tmp_path: Path) -> None:
    assert load_token(str(token_file(tmp_path))) == b"s3cret-token"
    assert load_token(str(token_file(tmp_path, 0o644))) == b"s3cret-token"


@pytest.mark.parametrize("mode", [0o664, 0o666, 0o622])
def test_a_token_others_may_write_is_refused_naming_it(tmp_path: Path, mode: int) -> None:
    path = token_file(tmp_path, mode)
    with pytest.raises(ListenerConfigError, match=f"bearer token file {path}: file writable"):
        load_token(str(path))


def test_a_token_of_another_user_or_behind_its_link_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    path = token_file(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(path)
    assert load_token(str(link)) == b"s3cret-token"  # our own link to our own file: fine
    os.lchown(link, NOBODY, NOBODY)
    with pytest.raises(ListenerConfigError, match=f"{link}: owned by uid {NOBODY}"):
        load_token(str(link))
    os.chown(path, NOBODY, NOBODY)
    with pytest.raises(ListenerConfigError, match=f"{path}: owned by uid {NOBODY}"):
        load_token(str(path))


def test_an_empty_or_missing_token_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b" \n")
    empty.chmod(0o600)
    with pytest.raises(ListenerConfigError, match="empty"):
        load_token(str(empty))
    with pytest.raises(ListenerConfigError, match=f"bearer token file {tmp_path}/absent"):
        load_token(str(tmp_path / "absent"))
