"""Devices, CDI devices, OCI hooks and rlimits in decisions: merge ownership and reply JSON."""

from __future__ import annotations

from bridge.contract import WebhookReply
from policy_server import Adjustment, Decision
from policy_server.engine.reply import decision_to_reply
from policy_server.sdk.decision_merge import merge
from policy_server.sdk.oci import Device, Hook, HookStage, Rlimit, StagedHook

NULL = Device("/dev/null", "c", 1, 3)
PRESTART = StagedHook(HookStage.PRESTART, Hook("/bin/a", ("a", "-x"), ("K=V",), 5))
POSTSTOP = StagedHook(HookStage.POSTSTOP, Hook("/bin/b"))


def test_hooks_append_and_keyed_kinds_conflict() -> None:
    merged = merge([
        ("first", Decision(adjust=Adjustment(
            devices=(NULL,), hooks=(PRESTART,), rlimits=(Rlimit("RLIMIT_NOFILE", 1, 2),),
            cdi_devices=("vendor.com/gpu=0",)))),
        ("second", Decision(adjust=Adjustment(
            devices=(Device("/dev/null", "c", 1, 7),), hooks=(POSTSTOP, PRESTART),
            rlimits=(Rlimit("RLIMIT_NOFILE", 3, 4), Rlimit("RLIMIT_CORE", 0, 0)),
            cdi_devices=("vendor.com/gpu=1",)))),
    ])  # fmt: skip
    assert sorted(c.path for c in merged.conflicts) == [
        "adjust.linux.devices[/dev/null]", "adjust.rlimits[RLIMIT_NOFILE]"]
    adjust = merged.decision.adjust
    assert adjust is not None
    assert adjust.devices == (Device("/dev/null", "c", 1, 7),)  # the later handler wins
    assert adjust.hooks == (PRESTART, POSTSTOP, PRESTART)  # hooks are never owned
    assert [r.soft for r in adjust.rlimits] == [3, 0]
    assert adjust.cdi_devices == ("vendor.com/gpu=0", "vendor.com/gpu=1")


def test_reply_json_uses_the_contracts_field_names() -> None:
    adjust = Adjustment(devices=(Device("/dev/fuse", "c", 10, 229, file_mode=0o666, uid=0),),
                        cdi_devices=("vendor.com/gpu=0",), hooks=(PRESTART, POSTSTOP),
                        rlimits=(Rlimit("RLIMIT_NOFILE", 1024, 4096),))  # fmt: skip
    assert not adjust.is_empty()
    reply = decision_to_reply(Decision(adjust=adjust))
    assert reply == {"adjust": {
        "hooks": {"prestart": [{"path": "/bin/a", "args": ["a", "-x"], "env": ["K=V"],
                                "timeout": 5}],
                  "poststop": [{"path": "/bin/b"}]},
        "rlimits": [{"type": "RLIMIT_NOFILE", "soft": 1024, "hard": 4096}],
        "CDI_devices": [{"name": "vendor.com/gpu=0"}],
        "linux": {"devices": [{"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229,
                               "file_mode": 0o666, "uid": 0}]},
    }}  # fmt: skip
    WebhookReply.model_validate(reply)
