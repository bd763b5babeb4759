"""Validating documents against the repository's JSON Schemas, each schema checked once.

`jsonschema.validate` checks the schema itself against its meta-schema on every call, which
costs far more than validating a small document; the tests validate hundreds of documents
against a few dozen schemas, so each schema's validator is built (and the schema checked)
once per session here.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import validators


@cache
def validator(path: Path) -> Any:
    """The validator of the schema at `path`, the schema checked against its meta-schema."""
    schema = json.loads(path.read_text())
    cls = validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate(document: Any, schema: Path) -> None:
    """Raise jsonschema.ValidationError unless `document` is valid under `schema`."""
    validator(schema).validate(document)
