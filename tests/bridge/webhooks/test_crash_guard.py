"""A checked contribution loses the fields that would crash the connected runtime
(bridge.webhooks.crash_guard), before the merge, and keeps everything else."""

from __future__ import annotations

from bridge.contract.runtime_hazards import hazards_for
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.crash_guard import without_hazards
from bridge.webhooks.guard import Contribution, Scope, parse_reply
from bridge.webhooks.reply_merge import Merger

SCOPE = Scope("CreateContainer", frozenset({"env", "sysctl"}), lambda _: False)


def _reply(sysctl: dict[str, str], env: bool = True) -> Contribution:
    adjust: dict[str, object] = {"linux": {"sysctl": sysctl}}
    if env:
        adjust["env"] = [{"key": "A", "value": "1"}]
    return parse_reply({"adjust": adjust}, "tuner", SCOPE)


def test_nri_v0_11_loses_the_sysctl_and_keeps_the_rest() -> None:
    asked = _reply({"net.core.somaxconn": "1024"})
    kept, rows = without_hazards(asked, hazards_for((0, 11, 0)))
    assert [row.path for row in rows] == ["linux.sysctl"]
    assert kept.adjust is not None
    assert not kept.adjust.HasField("linux")
    assert [(e.key, e.value) for e in kept.adjust.env] == [("A", "1")]
    assert "linux.sysctl" not in kept.walked.used  # walked again: the claims go too
    assert all(claim[1] != "sysctl" for claim in kept.walked.claims)
    assert asked.adjust is not None and asked.adjust.linux.sysctl  # the original is untouched


def test_removals_go_too() -> None:
    removal = parse_reply({"adjust": {"remove": {"sysctl": ["net.core.somaxconn"]}}}, "tuner",
                          SCOPE)
    kept, rows = without_hazards(removal, hazards_for((0, 11, 0)))
    assert rows and kept.adjust is None and not kept.changes_something


def test_other_versions_keep_the_contribution_as_it_is() -> None:
    asked = _reply({"net.core.somaxconn": "1024"})
    for nri in ((0, 10, 0), (0, 12, 0), (0, 12, 2)):
        kept, rows = without_hazards(asked, hazards_for(nri))
        assert kept is asked and rows == ()


def test_a_dropped_sysctl_claims_nothing_in_the_merge() -> None:
    merger = Merger()
    first, _ = without_hazards(_reply({"net.core.somaxconn": "1"}, env=False),
                               hazards_for((0, 11, 0)))
    merger.add(first)
    second = _reply({"net.core.somaxconn": "2"}, env=False)
    merger.add(second)  # no conflict with a sysctl that never reached the runtime
    assert merger.adjust is not None
    assert dict(merger.adjust.linux.sysctl) == {"net.core.somaxconn": "2"}
    assert isinstance(merger.adjust, api.ContainerAdjustment)
