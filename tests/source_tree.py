"""The repository's Python sources read and parsed once per test process.

The checks that read the products' code (tests/test_docstrings.py, tests/test_module_names.py,
tests/test_import_cycles.py, tests/test_self_contained.py) each walk every module; parsing them
is most of their time, so a parse is kept for the next check. The trees are shared: a caller
reads them and never changes one.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path


@cache
def source_text(path: Path) -> str:
    """The text of `path` (UTF-8)."""
    return path.read_text(encoding="utf-8")


@cache
def parsed_source(text: str) -> ast.Module:
    """The syntax tree of `text` (a module's source, or a test's changed copy of one)."""
    return ast.parse(text)


def parsed(path: Path) -> ast.Module:
    """The syntax tree of the module at `path`."""
    return parsed_source(source_text(path))
