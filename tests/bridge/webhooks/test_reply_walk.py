"""The reply walk: one pass over a reply's adjustment and updates gives the allow-list kinds,
the merge's claims (and the first double set), the field paths the capability check needs and
the first bad value, and the guard, the merge and the handler use what it found."""

from __future__ import annotations

from bridge.contract.capabilities import connected
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.guard import Contribution, Scope, parse_reply
from bridge.webhooks.reply_walk import CREATED, ReplyWalk


def _adjustment() -> api.ContainerAdjustment:
    adj = api.ContainerAdjustment(annotations={"a": "1", "-gone": ""},
                                  env=[api.KeyValue(key="X", value="1"), api.KeyValue(key="-Y")],
                                  mounts=[api.Mount(destination="/data")],
                                  args=["sleep", "1"])
    adj.hooks.prestart.add(path="/bin/true")
    adj.linux.sysctl["net.core.somaxconn"] = "1024"
    adj.linux.oom_score_adj.value = 10
    adj.linux.resources.cpu.shares.value = 512
    adj.linux.resources.cpu.cpus = "0-3"
    adj.linux.resources.pids.limit = 100
    adj.linux.resources.unified["memory.high"] = "1G"
    adj.linux.resources.devices.add(allow=True, type="c")
    return adj


def test_one_pass_finds_kinds_claims_paths_and_no_problem() -> None:
    walk = ReplyWalk()
    part = walk.adjustment(_adjustment())
    update = api.ContainerUpdate(container_id="other")
    update.linux.resources.memory.limit.value = 1 << 30
    upart = walk.update(update, "update[0]")
    assert part.problem is None and upart.problem is None
    assert part.kinds == {"annotations", "env", "mounts", "args", "hooks", "sysctl",
                          "oom_score_adj", "resources", "devices"}
    assert upart.kinds == {"resources"}
    assert walk.claims == {
        (CREATED, "annotations", "a"), (CREATED, "annotations", "gone"),
        (CREATED, "env", "X"), (CREATED, "env", "Y"), (CREATED, "mounts", "/data"),
        (CREATED, "args", ""), (CREATED, "sysctl", "net.core.somaxconn"),
        (CREATED, "oom_score_adj", ""), (CREATED, "cpu.shares", ""), (CREATED, "cpu.cpus", ""),
        (CREATED, "pids.limit", ""), (CREATED, "unified", "memory.high"),
        ("other", "memory.limit", ""),
    }  # hooks and cgroup device rules are append-only: no claims
    assert walk.duplicate is None
    assert walk.used == {"annotations", "env", "mounts", "args", "hooks", "linux.sysctl",
                         "linux.oom_score_adj", "linux.resources.cpu", "linux.resources.pids",
                         "linux.resources.unified", "linux.resources.devices",
                         "linux.resources.memory"}
    # What containerd 2.1.9 (NRI v0.8) would drop, leaf by leaf (the field table): args and
    # sysctl are newer than its NRI, cgroup device rules in an adjustment are read from v0.10.
    containerd = connected("containerd", "2.1.9", (0, 8, 0))
    assert containerd.dropped(walk.adjust_leaves, walk.update_leaves) == [
        "args", "linux.resources.devices", "linux.sysctl"]


def test_the_first_bad_value_is_kept_with_its_path() -> None:
    adj = api.ContainerAdjustment(env=[api.KeyValue(key="A=B")])
    adj.linux.resources.cpu.cpus = "3-1"
    part = ReplyWalk().adjustment(adj)
    assert part.problem is not None and str(part.problem).startswith("adjust.env[0].key:")
    update = api.ContainerUpdate(container_id="c")
    update.linux.resources.cpu.cpus = "0 - 3"
    upart = ReplyWalk().update(update, "update[2]")
    assert upart.problem is not None
    assert str(upart.problem) == ("update[2].linux.resources.cpu.cpus: invalid cpuset '0 - 3' "
                                  "(expected e.g. 0-3,8)")


def test_a_double_set_is_found_but_a_replace_is_not() -> None:
    replace = api.ContainerAdjustment(env=[api.KeyValue(key="-X"), api.KeyValue(key="X")])
    walk = ReplyWalk()
    walk.adjustment(replace)
    assert walk.duplicate is None and walk.claims == {(CREATED, "env", "X")}
    twice = api.ContainerAdjustment(env=[api.KeyValue(key="X"), api.KeyValue(key="X")])
    walk = ReplyWalk()
    walk.adjustment(twice)
    assert walk.duplicate == (CREATED, "env", "X")


def test_the_guard_keeps_its_walk_in_the_contribution() -> None:
    scope = Scope("CreateContainer", frozenset({"resources", "env"}), lambda cid: cid == "o",
                  creating="new")
    c = parse_reply({"adjust": {"env": [{"key": "A", "value": "1"}]},
                     "update": [{"container_id": "o",
                                 "linux": {"resources": {"cpu": {"shares": 4}}}}]},
                    "hook", scope)
    assert c.walked.claims == {(CREATED, "env", "A"), ("o", "cpu.shares", "")}
    assert c.walked.used == {"env", "linux.resources.cpu"}
    # A Contribution built in code walks its own messages, with the same findings.
    again = Contribution("hook", adjust=c.adjust, updates=c.updates)
    assert again.walked.claims == c.walked.claims and again.walked.used == c.walked.used


def test_the_walk_finds_the_leaves_the_applied_view_finds() -> None:
    """The dropped-field check reads the walk's leaf paths instead of walking again
    (contract.applied_view.set_leaves): the two agree on a reply per leaf of the field table
    (the differential test's cases) and on one setting them all."""
    from bridge.contract.adjustment import nri_adjustment_from_json
    from bridge.contract.applied_view import set_leaves
    from bridge.contract.convert import from_json
    from tests.e2e.leaf_cases import CASES

    everything = api.ContainerAdjustment()
    for case in CASES:
        adjust = nri_adjustment_from_json(case.adjust)
        everything.MergeFrom(adjust)
        walk = ReplyWalk()
        walk.adjustment(adjust)
        assert walk.adjust_leaves == set(set_leaves(adjust)) == {case.leaf}, case.leaf
        if case.update is not None:
            update = from_json({"container_id": "c", "linux": {"resources": case.update}},
                               api.ContainerUpdate)
            walk.update(update, "update[0]")
            assert walk.update_leaves == set(set_leaves(update)) == {case.leaf}, case.leaf
    walk = ReplyWalk()
    walk.adjustment(everything)
    assert walk.adjust_leaves == set(set_leaves(everything)) == {c.leaf for c in CASES}
