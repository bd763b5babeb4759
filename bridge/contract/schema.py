"""Generate the JSON Schemas in schemas/webhook/ from the contract: the request's from its
msgspec Structs (bridge.contract.request_structs), the reply's from the pydantic models.

`python -m bridge.contract.schema` rewrites the files (and docs/webhooks.md's tables of value
ranges, bridge.contract.value_docs); the staleness tests compare them with a fresh generation.
The reply's ranges and grammars are bridge.contract.value_rules' (reply side only). Files:
- request.schema.json / reply.schema.json: any event;
- events/<Event>.request.schema.json / events/<Event>.reply.schema.json: the
  same, narrowed to the payload and reply keys of one event.
Each file's `$id` is its own file name, so a reference between files (`$ref:
"../webhook/reply.schema.json#/$defs/Mount"` in schemas/try/) resolves from the files alone,
also with the stock `jsonschema --base-uri` tool.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from bridge.contract import value_docs
from bridge.contract.catalogue import REPLY_KEYS
from bridge.contract.request_structs import request_schemas
from bridge.contract.webhook_models import EVENT_NAMES, WebhookReply

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas" / "webhook"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _base(model: Any, title: str) -> dict[str, Any]:
    schema: dict[str, Any] = model.model_json_schema()
    return {"$schema": DIALECT, "$id": f"{title}.schema.json", **schema,
            "title": title}


def _narrow_reply(base: dict[str, Any], event: str) -> dict[str, Any]:
    schema = copy.deepcopy(base)
    schema["properties"] = {k: v for k, v in schema["properties"].items()
                            if k in REPLY_KEYS[event]}
    schema["title"] = f"{event}.reply"
    schema["$id"] = f"{event}.reply.schema.json"
    return schema


def build() -> dict[str, dict[str, Any]]:
    """Relative path -> schema document."""
    reply = _base(WebhookReply, "reply")
    docs = request_schemas(DIALECT)  # the request's: from its one declaration (msgspec)
    docs["reply.schema.json"] = reply
    for event in EVENT_NAMES:
        docs[f"events/{event}.reply.schema.json"] = _narrow_reply(reply, event)
    return docs


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def write(out_dir: Path = SCHEMA_DIR) -> list[Path]:
    written = []
    for rel, doc in build().items():
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(doc))
        written.append(path)
    return written


def main() -> int:
    for path in write():
        print(f"wrote {path}")
    print(f"wrote {value_docs.write()}")  # the doc's tables of the same rules
    return 0


if __name__ == "__main__":
    sys.exit(main())
