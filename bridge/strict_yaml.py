"""YAML read as kubectl reads it: a key given twice in one mapping is an error, not last-wins.

Owns: a PyYAML safe loader that refuses duplicate mapping keys (sigs.k8s.io/yaml, which kubectl
uses, refuses them since Kubernetes 1.30's strict decoding: `mapping key "x" already defined`),
names the file in every error mark (PyYAML's own says `"<unicode string>"` for text it was
given), and, for a document, the line of every key path (`("cases", 0, "expect")` -> 12) so a
schema error can point at its line. Used for suites, manifests and bridge configurations.
A syntax error is said as its reason (`one_line`: "this line is indented 5 spaces, the mapping
it continues (line 7) 8", "a '[' opened on line 1 is not closed", "a tab") before the parser's
own words, which name tokens (`expected <block end>, but found '<block mapping start>'`) and
leave the author to guess; the policy server's policy configurations and rules say it the same
way (through the SDK's `yaml_problem`).
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


def load_yaml(text: str, name: str) -> Any:
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
    """`line L, column C: reason (parser: problem)` for a YAML error (the caller names the
    file); the parser's words alone where no reason is known for them."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        why = reason(exc)
        if why:
            context = f", {exc.context}" if exc.context else ""
            text = f"{why} (parser: {exc.problem}{context})"
        else:
            text = f"{exc.problem} ({exc.context})" if exc.context else str(exc.problem)
        return f"line {mark.line + 1}, column {mark.column + 1}: {text}"
    return " ".join(str(exc).split())


def _spaces(n: int) -> str:
    return f"{n} space" if n == 1 else f"{n} spaces"


_CLOSERS = {"flow sequence": ("[", "]"), "flow mapping": ("{", "}")}


def reason(exc: yaml.MarkedYAMLError) -> str | None:
    """What is wrong, in the author's words, for the syntax errors people make (indentation,
    a tab, an unclosed bracket or quote, a second `: ` on a line); None for the others."""
    problem, context = exc.problem or "", exc.context or ""
    mark, start = exc.problem_mark, exc.context_mark
    assert mark is not None  # one_line asks only for marked errors
    opened = f" on line {start.line + 1}" if start is not None else ""
    if "cannot start any token" in problem and "\\t" in problem:
        return "a tab character: YAML indents with spaces only"
    if context.startswith("while parsing a block") and problem.startswith("expected <block end>"):
        if start is not None and mark.column != start.column:
            kind = context.removeprefix("while parsing a block ")
            kind = "list" if kind == "collection" else kind
            return (f"this line is indented {_spaces(mark.column)}, which lines up with no key "
                    f"or item above it (the {kind} begun on line {start.line + 1} is indented "
                    f"{_spaces(start.column)})")
        return ("this line does not continue the block above it (a key among list items, "
                "or an item among keys?): check its indentation")
    for what, (opening, closing) in _CLOSERS.items():
        if context == f"while parsing a {what}" and "<stream end>" in problem:
            return f"a '{opening}' opened{opened} is not closed with '{closing}'"
        if context == f"while parsing a {what}":
            return (f"inside a '{opening} ... {closing}'{opened}, items are separated by "
                    "', '")
    if context == "while scanning a quoted scalar":
        return f"a quoted string opened{opened} is not closed"
    if problem == "mapping values are not allowed here":
        return ("': ' where no key can start: quote a value that contains ': ' (and check "
                "that the line above ends its own value)")
    if context == "while scanning a simple key" and "could not find expected ':'" in problem:
        return (f"the line{opened} is neither `key: value` nor a list item `- ...` (a ':' "
                "missing after a key?)")
    if "<stream end>" in problem or "end of stream" in problem:
        where = opened if start is not None and start.line < mark.line else ""
        return f"the text ends before what was opened{where} is closed (a '[', '{{' or quote?)"
    if problem.startswith("found undefined alias"):
        return "an alias (*name) used before an anchor (&name) defines it"
    return None
