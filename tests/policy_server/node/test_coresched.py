"""Core scheduling (docs/koordinator.md#coresched): koordlet's group rules, cookie assignment
against an injected prctl that behaves like the kernel, and the real probe on this machine.

This VM's kernel is built without CONFIG_SCHED_CORE, so the real prctl cannot be exercised
beyond the probe; the assignment logic runs against ``FakeKernel``.
"""

from __future__ import annotations

import errno
import threading
from typing import Any

import pytest

from policy_server.node import coresched
from policy_server.policies.koordinator_qos.qos_node_plan import (
    core_sched_group,
    core_sched_rule,
    kernel_switches,
    kube_qos_dir,
    kube_qos_writes,
    manages_core_sched,
)
from tests.policy_server.factory import TRUST_LABEL, pod_target, rules


class FakeKernel:
    """Cookies per process; each calling *thread* has its own cookie, as in the kernel."""

    def __init__(self, cookies: dict[int, int] | None = None, gone: set[int] | None = None):
        self.cookies = dict(cookies or {})
        self.gone = gone or set()
        self.threads: dict[int, int] = {}
        self.next_cookie = 1000
        self.calls: list[tuple[str, int]] = []

    def _check(self, pid: int) -> None:
        if pid in self.gone:
            raise OSError(errno.ESRCH, "No such process")

    def get(self, pid: int) -> int:
        self._check(pid)
        return self.cookies.get(pid, 0)

    def create(self, pid: int) -> None:
        self._check(pid)
        self.calls.append(("create", pid))
        self.cookies[pid] = self.next_cookie
        self.next_cookie += 1

    def share_to(self, pid: int) -> None:
        self._check(pid)
        self.calls.append(("share_to", pid))
        self.cookies[pid] = self.threads.get(threading.get_ident(), 0)

    def share_from(self, pid: int) -> None:
        self._check(pid)
        self.calls.append(("share_from", pid))
        self.threads[threading.get_ident()] = self.cookies.get(pid, 0)


def test_this_kernel_reports_support_cleanly() -> None:
    supported, why = coresched.probe()
    # Either the kernel has core scheduling, or the probe says why in one clean sentence.
    assert supported or why == "kernel without core scheduling (CONFIG_SCHED_CORE not set)"


def test_probe_maps_einval_to_unsupported() -> None:
    class NoCoreSched(FakeKernel):
        def get(self, pid: int) -> int:
            raise OSError(errno.EINVAL, "Invalid argument")

    assert coresched.probe(NoCoreSched()) == (
        False, "kernel without core scheduling (CONFIG_SCHED_CORE not set)")  # fmt: skip
    assert coresched.probe(FakeKernel()) == (True, "")


def test_new_group_gets_one_new_cookie() -> None:
    # koordinator Test_addCookie "add cookie correctly": the first PID gets a new cookie, the
    # others share it.
    kernel = FakeKernel()
    out = coresched.apply_core_cookies(kernel, {"g": [11, 12, 13]}, [])
    assert kernel.cookies[11] == kernel.cookies[12] == kernel.cookies[13] == 1000
    assert out.created == {"g": 11} and sorted(out.assigned) == [12, 13] and not out.errors


def test_existing_cookie_of_the_group_is_kept() -> None:
    # Test_getCookie "sync cookie correctly": a group whose PIDs already carry a cookie keeps
    # it; new PIDs of the group join it, no new cookie is made.
    kernel = FakeKernel({12: 777})
    out = coresched.apply_core_cookies(kernel, {"g": [11, 12, 13]}, [])
    assert [kernel.cookies[p] for p in (11, 12, 13)] == [777, 777, 777]
    assert not out.created and sorted(out.assigned) == [11, 13]
    calls = len(kernel.calls)
    again = coresched.apply_core_cookies(kernel, {"g": [11, 12, 13]}, [])
    assert not again.assigned and not again.created and len(kernel.calls) == calls


def test_groups_get_different_cookies_and_disabled_pods_are_cleared() -> None:
    # A container moved from group a to b must not drag a's cookie into b.
    kernel = FakeKernel({1: 500, 2: 500, 3: 500, 9: 42})
    out = coresched.apply_core_cookies(kernel, {"a": [1, 2], "b": [3, 4]}, [9, 10])
    assert kernel.cookies[1] == kernel.cookies[2] == 500
    assert kernel.cookies[3] == kernel.cookies[4] != 500
    assert kernel.cookies[9] == 0 and out.cleared == [9]  # 10 had no cookie: untouched


def test_vanished_processes_are_skipped() -> None:
    # Test_getCookie "all pids get failed": processes that are gone are left to the next pass.
    kernel = FakeKernel(gone={5})
    out = coresched.apply_core_cookies(kernel, {"g": [5, 6]}, [])
    assert kernel.cookies[6] == 1000 and 5 not in kernel.cookies and not out.errors


def test_a_failing_kernel_does_not_escape() -> None:
    class Broken(FakeKernel):
        def create(self, pid: int) -> None:
            raise OSError(errno.EPERM, "Operation not permitted")

    out = coresched.apply_core_cookies(Broken(), {"g": [1]}, [])
    assert out.errors == ["create cookie for group g on pid 1: Operation not permitted"]


CORE_SCHED: dict[str, Any] = {"node_slo": {"resourceQOSStrategy": {
    "policies": {"cpuPolicy": "coreSched"},
    "lsrClass": {"cpuQOS": {"enable": True}},
    "lsClass": {"cpuQOS": {"enable": True}},
    "beClass": {"cpuQOS": {"enable": True}},
}}}  # fmt: skip


@pytest.mark.parametrize(
    ("qos", "labels", "expected"),
    [  # koordlet getPodEnabledAndGroup; sloconfig: coreExpeller LSR/LS true, BE false
        ("LSR", {}, "-expeller"),
        ("LS", {"koordinator.sh/core-sched-group-id": "web"}, "web-expeller"),
        ("BE", {"koordinator.sh/core-sched-group-id": "batch"}, "batch"),
        ("BE", {}, "(default)"),
        ("BE", {"koordinator.sh/core-sched-policy": "exclusive"}, "uid-1"),
        ("LS", {"koordinator.sh/core-sched-policy": "exclusive"}, "uid-1-expeller"),
        ("LS", {"koordinator.sh/core-sched-policy": "none"}, None),
    ],
)
def test_core_sched_group(qos: str, labels: dict[str, str], expected: str | None) -> None:
    target = pod_target(qos=qos, labels=labels)
    assert core_sched_group(target, core_sched_rule(rules(**CORE_SCHED))) == expected


def test_core_sched_needs_the_core_sched_policy_and_spares_system_pods() -> None:
    enabled_classes = {"node_slo": {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {
        "enable": True}}}}}  # fmt: skip
    rule = core_sched_rule(rules(**enabled_classes))  # cpuPolicy groupIdentity
    assert not rule.enabled and core_sched_group(pod_target(qos="LS"), rule) is None
    assert not manages_core_sched(pod_target(TRUST_LABEL, qos="SYSTEM"))


def test_kernel_switches() -> None:
    gi = {"node_slo": {"resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True}}}}}
    # Group identity on: core scheduling off first, then identity on (koordlet's bvt rule).
    assert kernel_switches(rules(**gi)) == {"sched_core": 0, "sched_group_identity_enabled": 1}
    # Core scheduling on: identity off (core_sched.go tryDisableGroupIdentity), sched_core on.
    assert kernel_switches(rules(**CORE_SCHED, features={"CoreSched": True})) == {
        "sched_group_identity_enabled": 0, "sched_core": 1}  # fmt: skip
    assert kernel_switches(rules(**CORE_SCHED)) == {}  # the CoreSched gate is off by default
    assert kernel_switches(rules()) == {}


@pytest.mark.parametrize(
    ("parent", "qos_dir"),
    [("/kubepods/burstable/pod1", "/kubepods/burstable"),
     ("/kubepods/pod1", "/kubepods"),
     ("kubepods-besteffort-pod1.slice", "kubepods-besteffort.slice"),
     ("kubepods-pod1.slice", "kubepods.slice"),
     ("/pod1", None), ("pod1.slice", None)],
)  # fmt: skip
def test_kube_qos_dir(parent: str, qos_dir: str | None) -> None:
    assert kube_qos_dir(parent) == qos_dir


def test_kube_qos_level_values() -> None:
    # koordinator Test_bvtPlugin_ruleUpdateCbForPods "callback with ls and be enabled":
    # kube-QoS dirs Guaranteed 0, Burstable 2, BestEffort -1.
    ls_be = {"node_slo": {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True}},
                                                  "beClass": {"cpuQOS": {"enable": True}}}}}
    parents = ["/kubepods/pod1", "/kubepods/burstable/pod2", "/kubepods/burstable/pod3",
               "/kubepods/besteffort/pod4"]  # fmt: skip
    writes = kube_qos_writes(parents, rules(**ls_be))
    assert {(w.cgroup_parent, w.file, w.value) for w in writes} == {
        ("/kubepods", "cpu.bvt_warp_ns", 0),
        ("/kubepods/burstable", "cpu.bvt_warp_ns", 2),
        ("/kubepods/besteffort", "cpu.bvt_warp_ns", -1),
    }
    # TestPlugin_SetKubeQOSCPUIdle "cpu idle enabled": BestEffort with schedIdle 1 -> 1.
    idle_be = {"node_slo": {"resourceQOSStrategy": {
        "policies": {"cpuPolicy": "coreSched"},
        "beClass": {"cpuQOS": {"enable": True, "schedIdle": 1}}}}}  # fmt: skip
    r = rules(**idle_be, features={"CoreSched": True, "GroupIdentity": False})
    assert {(w.cgroup_parent, w.file, w.value) for w in kube_qos_writes(parents, r)} == {
        ("/kubepods", "cpu.idle", 0),
        ("/kubepods/burstable", "cpu.idle", 0),
        ("/kubepods/besteffort", "cpu.idle", 1),
    }
    assert kube_qos_writes(parents, rules(features={"GroupIdentity": False})) == ()
