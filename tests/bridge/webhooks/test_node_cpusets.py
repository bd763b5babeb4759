"""A reply's cpuset outside the node's CPUs or memory nodes is refused (issue 45.1: runc failed
every container with `cpuset.cpus: numerical result out of range`), read from a fake sysfs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.guard import Scope, parse_reply
from bridge.webhooks.kinds import DEFAULT_ALLOW
from bridge.webhooks.node_cpusets import NodeCpus, read_node_cpus
from bridge.webhooks.node_hugepages import NodeSettings

TWO = NodeCpus(frozenset({0, 1}), frozenset({0}))


def scope(node: NodeCpus, event: str = "CreateContainer") -> Scope:
    return Scope(event, DEFAULT_ALLOW | {"resources"}, {"other"}.__contains__, "new",
                 node_cpus=lambda: node)


def cpu(**values: str) -> dict[str, Any]:
    return {"linux": {"resources": {"cpu": values}}}


def refused(reply: dict[str, Any], s: Scope, path: str) -> str:
    with pytest.raises(WebhookFailure) as caught:
        parse_reply(reply, "policy", s)
    assert caught.value.kind is FailureKind.INVALID
    assert str(caught.value).startswith(f"invalid_value: {path}: "), caught.value
    return str(caught.value)


def test_cpus_outside_the_node_are_refused() -> None:
    why = refused({"adjust": cpu(cpus="0-15")}, scope(TWO), "adjust.linux.resources.cpu.cpus")
    assert "CPUs 2-15 the node does not have (online: 0-1)" in why
    refused({"adjust": cpu(cpus="2")}, scope(TWO), "adjust.linux.resources.cpu.cpus")  # edge


def test_mems_outside_the_node_are_refused() -> None:
    refused({"adjust": cpu(cpus="0", mems="0-1")}, scope(TWO), "adjust.linux.resources.cpu.mems")


def test_an_update_outside_the_node_is_refused() -> None:
    update = {"update": [{"container_id": "other", **cpu(cpus="1-3")}]}
    refused(update, scope(TWO, "UpdateContainer"), "update[0].linux.resources.cpu.cpus")


def test_inside_the_node_or_not_known_passes() -> None:
    assert parse_reply({"adjust": cpu(cpus="0-1", mems="0")}, "p", scope(TWO)).adjust
    assert parse_reply({"adjust": cpu(cpus="1")}, "p", scope(TWO)).adjust
    assert parse_reply({"adjust": cpu(cpus="0-1023")}, "p", scope(NodeCpus())).adjust


def test_the_node_is_read_from_sysfs_root(tmp_path: Path) -> None:
    system = tmp_path / "devices" / "system"
    (system / "cpu").mkdir(parents=True)
    (system / "cpu" / "online").write_text("0-3\n")
    assert read_node_cpus(str(tmp_path)) == NodeCpus(frozenset(range(4)), frozenset({0}))
    (system / "node").mkdir()
    (system / "node" / "online").write_text("0-1\n")
    assert NodeSettings(str(tmp_path)).node_cpus().mems == frozenset({0, 1})
    (system / "cpu" / "online").write_text("garbage\n")
    assert read_node_cpus(str(tmp_path)).cpus is None
    assert read_node_cpus(str(tmp_path / "none")) == NodeCpus()
