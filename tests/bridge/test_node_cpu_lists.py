"""bridge.node_cpu_lists: a sysfs list file read into ids, or None when it is not one."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.node_cpu_lists import read_cpu_list


@pytest.mark.parametrize(("content", "ids"), [
    (b"0-3\n", frozenset({0, 1, 2, 3})),
    (b"0,2-3,8\n", frozenset({0, 2, 3, 8})),
    (b"5", frozenset({5})),
    (b"\n", frozenset()),  # no CPU online (a node's cpulist with none left)
    (b"", frozenset()),
])
def test_a_list_file_gives_its_ids(tmp_path: Path, content: bytes, ids: frozenset[int]) -> None:
    path = tmp_path / "online"
    path.write_bytes(content)
    assert read_cpu_list(path) == ids


@pytest.mark.parametrize("content", [
    b"0-3,\n",  # the contract's grammar refuses what the kernel never prints
    b"3-0\n",
    b"0, 1\n",
    b"cpu0\n",
    "0-3\u00a0\n".encode(),  # not ASCII
])
def test_what_is_not_a_list_is_not_known(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "online"
    path.write_bytes(content)
    assert read_cpu_list(path) is None


def test_a_missing_or_unreadable_file_is_not_known(tmp_path: Path) -> None:
    assert read_cpu_list(tmp_path / "absent") is None
    assert read_cpu_list(tmp_path) is None  # a directory: read_text raises IsADirectoryError
