"""The one Kubernetes quantity grammar (bridge.contract.quantity), value by value as the API
server reads each string (apimachinery's resource.Quantity), and its two users agreeing."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from bridge.contract import quantity
from bridge.kube import parse_documents, pods_of
from policy_server.policies.koordinator_qos import annotations as qos_annotations
from policy_server.policies.koordinator_qos import keys

MAX = 2**63 - 1


@pytest.mark.parametrize(("text", "exact"), [
    ("500m", Fraction(1, 2)),
    ("1.5", Fraction(3, 2)),
    ("1.", Fraction(1)),
    (".5Ki", Fraction(512)),
    ("2Gi", Fraction(2 * 2**30)),
    ("1e3", Fraction(1000)),
    ("1E3", Fraction(1000)),
    ("1E-3", Fraction(1, 1000)),
    ("1E", Fraction(10**18)),  # E alone is exa, not an exponent
    ("2E", Fraction(2 * 10**18)),
    ("1Ei", Fraction(2**60)),
    ("3Pi", Fraction(3 * 2**50)),
    (" 4Mi ", Fraction(4 * 2**20)),  # the JSON decoder trims
    ("+1", Fraction(1)),
    ("-1", Fraction(-1)),
    ("1n", Fraction(1, 10**9)),
    ("1e-12", Fraction(1, 10**9)),  # rounded up to 1n
    ("0.0000000001", Fraction(1, 10**9)),
    ("0e-999999999", Fraction(0)),
    ("16Ei", Fraction(MAX)),  # 2^64: capped at the largest int64
    ("1e99", Fraction(MAX)),
    ("1e999999999", Fraction(MAX)),  # computed without building 10^999999999
    ("-1e99", Fraction(-MAX)),
    (3, Fraction(3)),
    (0.1, Fraction(1, 10)),  # the number's decimal text, not its binary value
    (2.5e-10, Fraction(1, 10**9)),
])
def test_parse(text: object, exact: Fraction) -> None:
    assert quantity.parse_quantity(text) == exact


@pytest.mark.parametrize("text", ["", "abc", "1K", "1 Gi", "Gi", "1e", "1Ee", "1e3.5", "1Eii",
                                  "1ei", "--1", "1.2.3", True, None, [1], float("inf"),
                                  float("nan")])
def test_rejects(text: object) -> None:
    with pytest.raises(quantity.QuantityError, match="expected a quantity like 500m"):
        quantity.parse_quantity(text)


def test_roundings() -> None:
    assert quantity.milli_value(quantity.parse_quantity("0.0001")) == 1
    assert quantity.value(quantity.parse_quantity("1.5")) == 2
    assert quantity.value_of("1Ei") == 2**60


@pytest.mark.parametrize("text", ["1Ei", "1E", "0.1", "1e-12", "1e99", "512Mi"])
def test_manifests_and_koordinator_agree(text: str) -> None:
    """`try` and koordinator-qos read one grammar: the same string, the same bytes."""
    doc = ("kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
           f"    image: busybox\n    resources: {{limits: {{memory: '{text}'}}}}\n")
    ((where, obj),) = parse_documents(doc, "q.yaml")
    (pod,) = pods_of(obj, where)
    assert dict(pod.containers[0].limits)["memory"] == quantity.parse_quantity(text)
    spec = {"containers": {"c": {"limits": {keys.RESOURCE_BATCH_MEMORY: text}}}}
    batch = qos_annotations.extended_resource_spec(
        {keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(spec)})
    assert batch is not None
    assert batch["c"].limits.batch_memory == quantity.value_of(text)
