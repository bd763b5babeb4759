"""YAML syntax errors say what is wrong, not only where (issue 44.6): the parser's words name
tokens (`expected <block end>, but found '<block mapping start>'`), so bridge.strict_yaml puts
the reason first, keeps the parser's words after it, and leaves a line it has no reason for as
the parser says it."""

from __future__ import annotations

import pytest
import yaml

from bridge import strict_yaml


def _error(text: str) -> str:
    with pytest.raises(yaml.YAMLError) as caught:
        strict_yaml.load_yaml(text, "f.yaml")
    return strict_yaml.one_line(caught.value)


@pytest.mark.parametrize(("text", "said"), [
    ("cases:\n  - name: a\n    expect:\n      - pod: x\n     verdict: adjusted\n",
     "line 5, column 6: this line is indented 5 spaces, which lines up with no key or item "
     "above it (the mapping begun on line 2 is indented 4 spaces) (parser: expected "
     "<block end>, but found '<block mapping start>', while parsing a block mapping)"),
    ("a:\n  - x\n  y: 1\n",
     "line 3, column 3: this line does not continue the block above it (a key among list "
     "items, or an item among keys?): check its indentation"),
    ("a: [1, 2\n", "line 2, column 1: a '[' opened on line 1 is not closed with ']'"),
    ("a: {x: 1\n", "line 2, column 1: a '{' opened on line 1 is not closed with '}'"),
    ("key: 'x\n", "line 2, column 1: a quoted string opened on line 1 is not closed"),
    ("a: b: c\n", "line 1, column 5: ': ' where no key can start: quote a value that contains"),
    ("\t- x\n", "line 1, column 1: a tab character: YAML indents with spaces only"),
    ("max: [\n", "line 2, column 1: the text ends before what was opened is closed (a '['"),
    ("a: *x\n", "line 1, column 4: an alias (*name) used before an anchor (&name) defines it"),
])
def test_the_reason_comes_first(text: str, said: str) -> None:
    line = _error(text)
    assert line.startswith(said), line
    assert "(parser: " in line  # the parser's own words stay, after the reason


def test_an_error_without_a_known_reason_is_the_parsers() -> None:
    line = _error("a: 1\na: 2\n")
    assert line == ("line 2, column 1: found duplicate key 'a' (first given on line 1); a key "
                    "may appear only once (while constructing a mapping)")
    assert "parser:" not in line
