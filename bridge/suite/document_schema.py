"""Generate schemas/test/suite.schema.json from the suite model (bridge.suite.document).

`python -m bridge.suite.document_schema` rewrites the file; the staleness test compares it with
a fresh generation (as bridge.contract.schema does for schemas/webhook/). Must not: describe
anything the model does not (the model is the one source).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bridge.suite.document import Suite

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "test" / "suite.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def build() -> dict[str, Any]:
    return {"$schema": DIALECT, "$id": "nri-webhook-bridge/v1/test-suite",
            **Suite.model_json_schema(),
            "description": "A policy test suite for `nri-webhook-bridge test` "
                           "(docs/policy-tests.md)."}


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def main() -> int:
    SCHEMA_PATH.parent.mkdir(parents=True, exist_ok=True)
    SCHEMA_PATH.write_text(render(build()))
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
