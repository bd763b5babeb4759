"""Manifest files in, parsed documents out: YAML or JSON, several documents a file, `-` stdin.

Owns reading the files and splitting them into documents, each labelled for messages
(`pod.yaml document 2`). Must not: look inside a document (bridge.kube.manifest does).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from bridge import strict_yaml
from bridge.kube.manifest_error import ManifestError


def read_manifest_documents(paths: Sequence[str]) -> Iterator[tuple[str, Any]]:
    """(label, parsed document) for every document in `paths` (`-` is stdin)."""
    for path in paths:
        if path == "-":
            text, name = sys.stdin.read(), "<stdin>"
        else:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ManifestError(path, "", f"cannot read: {exc}") from None
            name = path
        yield from parse_documents(text, name)


def parse_documents(text: str, name: str) -> Iterator[tuple[str, Any]]:
    """The documents of one YAML or JSON text; empty documents are skipped."""
    try:
        docs = strict_yaml.load_all(text, name)
    except yaml.YAMLError as exc:  # kubectl refuses a key given twice too
        raise ManifestError(name, "", f"not YAML or JSON: {strict_yaml.one_line(exc)}") from None
    for index, doc in enumerate(docs, start=1):
        if doc is not None:
            yield (name if len(docs) == 1 else f"{name} document {index}"), doc
