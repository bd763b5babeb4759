"""YAML read as kubectl reads it: a key given twice in one mapping is an error, not last-wins.

Owns: a PyYAML safe loader that refuses duplicate mapping keys (sigs.k8s.io/yaml, which kubectl
uses, refuses them since Kubernetes 1.30's strict decoding: `mapping key "x" already defined`),
names the file in every error mark (PyYAML's own says `"<unicode string>"` for text it was
given), and, for a document, the line of every key path (`("cases", 0, "expect")` -> 12) so a
schema error can point at its line. Used for suites, manifests and bridge configurations.
Must not: know what any document means.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, SequenceNode

Path = tuple[str | int, ...]


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader whose mappings refuse a key they already hold."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[Any, Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<` merges are PyYAML's business (flatten_mapping)
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base class says so
            if first is not None:
                raise ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r} (first given on line "
                    f"{first.start_mark.line + 1}); a key may appear only once",
                    key_node.start_mark)
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _loader(text: str, name: str) -> _StrictLoader:
    loader = _StrictLoader(text)
    loader.name = name  # every mark (error position) names the file
    return loader


def load(text: str, name: str) -> Any:
    """The one document in `text` (None when empty); yaml.YAMLError naming `name`."""
    return load_with_lines(text, name)[0]


def load_all(text: str, name: str) -> list[Any]:
    """Every document in `text`, empty ones as None."""
    loader = _loader(text, name)
    try:
        docs = []
        while loader.check_data():  # type: ignore[no-untyped-call]
            docs.append(loader.get_data())
        return docs
    finally:
        loader.dispose()


def load_with_lines(text: str, name: str) -> tuple[Any, dict[Path, int]]:
    """The one document in `text`, and the (1-based) line of every key path and list item."""
    loader = _loader(text, name)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        data = loader.construct_document(node)
    finally:
        loader.dispose()
    lines: dict[Path, int] = {}
    _lines(node, (), lines)
    return data, lines


def _lines(node: Node, path: Path, out: dict[Path, int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value) if not isinstance(key_node.value, list) else "?"
            out.setdefault((*path, key), key_node.start_mark.line + 1)
            _lines(value_node, (*path, key), out)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            _lines(item, (*path, i), out)


def line_of(lines: dict[Path, int], path: Path) -> int | None:
    """The line of `path`, or of its nearest ancestor that is in the file."""
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def one_line(exc: yaml.YAMLError) -> str:
    """`line L, column C: problem` for a YAML error (the caller names the file)."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        context = f" ({exc.context})" if exc.context else ""
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}{context}"
    return " ".join(str(exc).split())
