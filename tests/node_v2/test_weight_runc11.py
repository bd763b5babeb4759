"""cpu.weight on runc 1.1 (the linear conversion): see weight_check.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import StackFactory
from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient

from .guest_node import RUNC_1_1
from .weight_check import check_weights_follow_the_runtime

pytestmark = pytest.mark.node_v2
NODE_V2_WEIGHT = 9  # run-guest.sh's split: seconds in a guest / 10
RUNC = RUNC_1_1


def test_weights_follow_runc_1_1(containerd: Containerd, clean_pods: CriClient,
                                 start_stack: StackFactory, tmp_path: Path) -> None:
    check_weights_follow_the_runtime(containerd, clean_pods, start_stack, tmp_path, "linear")
