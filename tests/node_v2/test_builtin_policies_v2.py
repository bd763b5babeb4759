"""The built-in policies on the cgroup v2 + systemd node: the e2e tests of
tests/e2e/test_builtin_policies.py and tests/e2e/test_cpu_pools.py, collected here unchanged
and run on the guest's containerd 2.1.9 (systemd driver, runc 1.3) with kubelet-made pod
slices. Device access inside the container goes through runc's eBPF device filter on v2."""

from __future__ import annotations

import pytest

from tests.e2e.test_builtin_policies import (  # noqa: F401  (collected here)
    test_cdi_device_from_an_annotation,
    test_device_and_mount_from_annotations_and_a_refused_device,
    test_hook_from_the_hooks_dir_runs_at_container_start,
    test_rlimits_from_annotations_in_proc_limits,
)
from tests.e2e.test_cpu_pools import (  # noqa: F401  (collected here)
    test_exclusive_cpus_move_the_shared_pool_and_survive_restarts,
)

pytestmark = pytest.mark.node_v2
NODE_V2_WEIGHT = 32  # run-guest.sh's split: seconds in a guest / 10
# On the host these tests' pods sit in no QoS level, so cpu-pools takes them as Guaranteed (its
# exclusive pod asks for requests = limits); kubelet would make that pod's slice under
# kubepods.slice itself. The other policies do not look at the class.
POD_QOS = "guaranteed"
