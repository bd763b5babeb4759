"""Tests for owner_validator.py with the policy test kit (``pytest examples/validator-policy``):
a ValidateContainerAdjustment request as containerd 2.2+ sends it, with the owners of the merged
adjustment, and the validator's verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from policy_server.testing import make_request
from policy_server.testing.plugin import RunnerFactory

HERE = Path(__file__).parent
POLICY = HERE / "owner_validator.py"
# The recorded shape of the request (docs/webhooks.md, "Validating webhooks").
BASE = json.loads((HERE.parents[1] / "schemas" / "webhook" / "examples"
                   / "ValidateContainerAdjustment.request.json").read_text())
CID = BASE["container"]["id"]


def _validation(adjust: dict[str, Any], simple: dict[str, str],
                compound: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    owners: dict[str, Any] = {"simple": simple}
    if compound:
        owners["compound"] = {field: {"owners": keys} for field, keys in compound.items()}
    return make_request(
        "ValidateContainerAdjustment", base=BASE, adjust=adjust,
        owners={"owners": {CID: owners}},
        plugins=[{"name": "webhook-bridge", "index": "10"}, {"name": "tuner", "index": "90"}])


SHARES = {"linux": {"resources": {"cpu": {"shares": 512}}}}


def test_resources_set_by_a_trusted_plugin_pass(policy_runner: RunnerFactory) -> None:
    reply = policy_runner(POLICY).send(_validation(SHARES, {"16": "10-webhook-bridge"}))
    assert reply.no_change


def test_resources_set_by_another_plugin_are_rejected(policy_runner: RunnerFactory) -> None:
    reply = policy_runner(POLICY).send(_validation(SHARES, {"16": "90-tuner"}))
    # the engine prefixes a reason with the handler that gave it
    assert reply.reject == (
        "trusted_resources_only: CPUShares set by 90-tuner, which may not change resources")


def test_devices_are_rejected_naming_who_added_them(policy_runner: RunnerFactory) -> None:
    adjust = {"linux": {"devices": [{"path": "/dev/fuse", "type": "c", "major": 10,
                                     "minor": 229}]}}
    reply = policy_runner(POLICY).send(
        _validation(adjust, {}, compound={"4": {"/dev/fuse": "90-tuner"}}))
    assert reply.reject == "trusted_resources_only: devices added by 90-tuner"


def test_the_bundled_request_passes(policy_runner: RunnerFactory) -> None:
    # containerd's own recording: the bridge (index 10) set the CPU shares.
    assert policy_runner(POLICY).send(BASE).no_change
