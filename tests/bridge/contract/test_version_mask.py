"""NRI version inference and event-mask computation
(docs/protocol.md#configure-and-the-event-mask)."""

from __future__ import annotations

import pytest

from bridge.contract.catalogue import NriEvent, mask_of, supported_mask
from bridge.contract.nri_version import nri_version_of, parse_version, pre_release_of


@pytest.mark.parametrize(("name", "version", "reported", "expected"), [
    ("containerd", "1.7.24~ds1", "", (0, 6, 1)),
    ("containerd", "v1.7.5", "", (0, 3, 0)),
    ("containerd", "1.7.27", "", (0, 8, 0)),
    ("containerd", "2.1.9+unknown", "", (0, 8, 0)),
    ("v2", "2.1.9", "", (0, 8, 0)),
    ("containerd", "2.2.0", "", (0, 10, 0)),
    ("containerd", "v2.2.7", "", (0, 11, 0)),  # as recorded: a "v", no NRI_version
    ("containerd", "2.3.0", "", (0, 12, 0)),
    ("containerd", "v2.3.4", "v0.12.0", (0, 12, 0)),  # as recorded
    ("containerd", "v2.3.4", "", (0, 12, 0)),
    ("containerd", "1.7.31", "", (0, 8, 0)),
    # containerd 2.4: the beta vendors v0.12.1 (containerd/nri#301), GA v0.12.3.
    ("containerd", "v2.4.0-beta.0", "v0.12.1", (0, 12, 1)),  # as recorded
    ("containerd", "v2.4.0-beta.0", "", (0, 12, 1)),  # a pre-release is not its release
    ("containerd", "v2.4.0", "", (0, 12, 3)),
    ("containerd", "v2.4.2+unknown", "", (0, 12, 3)),
    ("containerd", "v2.4.1-rc.0", "", (0, 12, 3)),  # unlisted: the release before (2.4.0)
    ("containerd", "2.4.0-beta+unknown", "", (0, 12, 0)),  # a dev build: the 2.3 line's
    ("containerd", "v2.3.0-rc.0", "", (0, 11, 0)),  # its tag's go.mod
    ("containerd", "v2.3.0-rc.1", "", (0, 12, 0)),
    ("containerd", "2.5.0", "", (0, 12, 3)),  # newer than the table: the newest known
    ("cri-o", "1.37.0", "", (0, 12, 0)),
    ("cri-o", "1.37.2", "v0.12.0", (0, 12, 0)),
    ("cri-o", "1.37.0-rc.1", "", (0, 11, 0)),  # unlisted pre-release: 1.36's
    ("cri-o", "1.38.0", "", (0, 12, 0)),
    ("cri-o", "1.31.2", "", (0, 6, 1)),
    ("cri-o", "1.33.1", "", (0, 9, 1)),
    ("cri-o", "1.34.0", "", (0, 10, 0)),
    ("cri-o", "1.35.2", "", (0, 11, 0)),
    ("cri-o", "1.36.3", "", (0, 11, 0)),  # as recorded
    ("containerd", "2.2.1", "v0.12.2", (0, 12, 2)),
    ("containerd", "1.7.24", "(devel)", (0, 6, 1)),
    ("podman", "5.0", "", None),
])
def test_inference(name: str, version: str, reported: str,
                   expected: tuple[int, int, int] | None) -> None:
    assert nri_version_of(name, version, reported) == expected


def test_pre_releases_are_told_from_distribution_suffixes() -> None:
    assert pre_release_of("v2.4.0-beta.0") == "2.4.0-beta.0"
    assert pre_release_of("v2.4.0-beta.0+unknown") == "2.4.0-beta.0"
    assert pre_release_of("1.7.24~ds1") is None
    assert pre_release_of("2.1.9+unknown") is None
    assert pre_release_of("v2.4.0") is None
    assert parse_version("v2.4.0-beta.0") == (2, 4, 0)


def test_masks() -> None:
    assert supported_mask((0, 6, 1)) == 0x07FF
    assert supported_mask(None) == 0x07FF
    assert supported_mask((0, 10, 0)) == 0x3FFF
    assert supported_mask((0, 9, 1)) == 0x07FF  # CRI-O 1.33's pre-release: not risked
    assert mask_of({NriEvent.CREATE_CONTAINER, NriEvent.STOP_CONTAINER}) == 0x208
    assert NriEvent.VALIDATE_CONTAINER_ADJUSTMENT.bit == 0x2000
