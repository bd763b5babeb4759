"""cpu-pools' configured layout must be the node's CPUs (issue 45.1: a configuration naming CPUs
the node lacks would make the runtime fail every shared container): refused at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy_server.exceptions import PolicyLoadError
from policy_server.policies import build_builtin
from policy_server.sdk import NodeFacts, NodeTopology

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "policies" / "cpu-pools.yaml"


def node(cpus: int) -> NodeFacts:
    return NodeFacts(topology=NodeTopology(cpus=frozenset(range(cpus)), mems=frozenset({0})))


def test_a_layout_naming_cpus_the_node_lacks_is_refused() -> None:
    with pytest.raises(PolicyLoadError) as caught:
        build_builtin("cpu-pools", EXAMPLE, node(2))
    assert "layout" in str(caught.value)
    assert "CPUs 2-7 the node does not have" in str(caught.value)


@pytest.mark.parametrize("cpus", [8, 64])
def test_a_layout_inside_the_node_loads(cpus: int) -> None:
    build_builtin("cpu-pools", EXAMPLE, node(cpus))
    build_builtin("cpu-pools", {"layout": {0: "0-1"}}, node(2))
    build_builtin("cpu-pools", EXAMPLE, NodeFacts())  # the node not known: nothing to check
