"""The suite document: its schema is generated from the model and current, the examples
validate against it, and what one field can get wrong is refused with the field named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from bridge.kube.node import CGROUP_DRIVERS
from bridge.suite import document_schema
from bridge.suite.document import CgroupDriver, Expectation, Suite, Webhooks

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples" / "tests").glob("*.yaml"))


def test_schema_is_not_stale() -> None:
    assert document_schema.SCHEMA_PATH.exists(), "run `python -m bridge.suite.document_schema`"
    fresh = document_schema.render(document_schema.build())
    assert document_schema.SCHEMA_PATH.read_text() == fresh, (
        "schemas/test/suite.schema.json is stale: run `python -m bridge.suite.document_schema`")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_suites_validate_against_the_schema(path: Path) -> None:
    document = yaml.safe_load(path.read_text())
    jsonschema.Draft202012Validator(json.loads(document_schema.SCHEMA_PATH.read_text())).validate(document)
    Suite.model_validate(document)


def test_the_cgroup_drivers_are_kubes() -> None:
    assert get_args(CgroupDriver) == CGROUP_DRIVERS


@pytest.mark.parametrize(("fields", "problem"), [
    ({}, "give one of config, url or policy_modules/rules/policies"),
    ({"url": "http://x/p", "rules": "r.yaml"}, "not url and policy_modules/rules/policies"),
])
def test_exactly_one_webhook_target(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Webhooks.model_validate(fields)


@pytest.mark.parametrize(("fields", "problem"), [
    ({"reject": "("}, "not a regular expression"),
    ({"warnings": ["[a-"]}, "not a regular expression"),
    ({"effective": {"a..b": 1}}, "not a dotted path"),
    ({"adjust": {"env": {"matches": "("}}}, "not a regular expression"),
    ({"reject": "x", "verdict": "adjusted"}, "the verdict is rejected, not adjusted"),
    ({"verdict": "changed"}, "'adjusted', 'unchanged' or 'rejected'"),
    # holds for any value (issue 44.6): refused, with the path
    ({"effective": {"env": {"contains": []}}}, "'env': `contains: \\[\\]` says nothing"),
    ({"adjust": {"annotations": {"contains": ""}}}, "'annotations': `contains: \"\"` says"),
    ({"effective": {"env": {"not_contains": []}}}, "name what the value must not contain"),
])
def test_bad_expectations(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Expectation.model_validate({"pod": "p", **fields})
