"""The repository explains itself: no pointers to documents a user never sees, no stale numbers.

- No section-sign citation anywhere in the tracked text (they pointed at documents outside the
  repository); a fact the code relies on is written in docs/ and cited as `docs/<page>.md#<anchor>`.
- Every such citation, in code and in docs/ links, names a page that exists and a heading on it.
- No measured figure in a code comment or docstring: a microsecond figure, or an approximate
  millisecond or percent figure, goes stale the day the code changes. The reasoning stays in the
  comment; the number lives in docs/performance.md ("Numbers behind the code"). Benchmarks are
  exempt: printing and checking numbers is their job.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from functools import cache
from pathlib import Path

import pytest

from tests.source_tree import parsed_source

ROOT = Path(__file__).resolve().parents[1]
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".txt", ".json", ".jsonl",
                 ".proto", ".cfg", ".ini", ".conf", ".service", ""}
SECTION_SIGN = "\u00a7"
# Documents outside the repository that code or docs used to point at (written in pieces so
# this file does not match itself).
OUTSIDE = re.compile("|".join([
    "shared" + "/docs", "shared" + "/fixtures", "/work" + "/", "fact " + "sheet",
    "nri-" + "protocol", "koordinator-qos" + r"\.md", "style " + r"rule \d", "design " + r"\d",
]), re.IGNORECASE)
# Code whose comments must not carry measured figures.
CODE_DIRS = ("bridge", "policy_server", "tests", "examples")
MEASURED = re.compile(
    r"\d\s?(?:\u00b5|\u03bc)s"  # any microsecond figure: 33 µs
    r"|~\s?\d[\d.,]*\s?(?:ms|%)"  # an approximate millisecond or percent figure: ~7%
)
CITATION = re.compile(r"docs/([\w.-]+\.md)#([\w-]+)")
MD_LINK = re.compile(r"\]\(([^)\s]*?\.md)?#([\w-]+)\)")


@cache
def tracked() -> tuple[str, ...]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    files = [f for f in out.stdout.decode().split("\0") if f]
    if not files:
        pytest.fail("git ls-files listed nothing: run the tests from a git checkout")
    return tuple(f for f in files
                 if Path(f).suffix in TEXT_SUFFIXES and not f.startswith("bridge/proto/"))


def text(path: str) -> str:
    try:
        return (ROOT / path).read_text(encoding="utf-8")
    except (UnicodeDecodeError, FileNotFoundError):
        return ""


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    plain = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")


@cache
def anchors(page: str) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    in_code = False
    for line in text(page).splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return frozenset(found)


def comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python source."""
    out = [(tok.start[0], tok.string) for tok in
           tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT]
    for node in ast.walk(parsed_source(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                out.append((first.lineno, first.value.value))
    return out


def test_no_section_sign_and_no_outside_documents() -> None:
    found = []
    for path in tracked():
        if path == THIS:
            continue
        for n, line in enumerate(text(path).splitlines(), 1):
            if SECTION_SIGN in line or OUTSIDE.search(line):
                found.append(f"{path}:{n}: {line.strip()[:120]}")
    assert not found, "cite the repository's own docs (docs/<page>.md#<anchor>):\n" + "\n".join(
        found)


def test_every_docs_citation_names_an_existing_heading() -> None:
    broken = []
    for path in tracked():
        body = text(path)
        targets = [(f"docs/{page}", anchor) for page, anchor in CITATION.findall(body)]
        if path.endswith(".md"):
            here = Path(path).parent
            for page, anchor in MD_LINK.findall(body):
                target = (here / page).as_posix() if page else path
                targets.append((str(Path(target)).replace("\\", "/"), anchor))
        for page, anchor in targets:
            resolved = (ROOT / page).resolve()
            if not resolved.is_file():
                broken.append(f"{path}: {page} does not exist")
            elif anchor not in anchors(resolved.relative_to(ROOT).as_posix()):
                broken.append(f"{path}: no heading #{anchor} in {page}")
    assert not broken, "\n".join(sorted(set(broken)))


def test_no_measured_figures_in_code_comments() -> None:
    found = []
    for path in tracked():
        if not path.endswith(".py") or not path.startswith(CODE_DIRS) or path == THIS:
            continue
        source = text(path)
        if not MEASURED.search(source):
            continue  # no candidate at all: skip the (slow) tokenizing
        for line, chunk in comments_and_docstrings(source):
            for offset, piece in enumerate(chunk.splitlines()):
                if MEASURED.search(piece):
                    found.append(f"{path}:{line + offset}: {piece.strip()[:120]}")
    assert not found, ("measured figures belong in docs/performance.md#numbers-behind-the-code; "
                       "keep the reasoning, point there:\n" + "\n".join(found))


@pytest.mark.parametrize(("bad", "test"), [
    (f"# NRI holds a lock here (protocol {SECTION_SIGN}4.7)", "section"),
    ("# the pool spends ~33 \u00b5s per POST", "measured"),
    ('"""Costs ~7% of the CPU."""', "measured"),
])
def test_the_checks_catch_what_they_are_for(bad: str, test: str) -> None:
    if test == "section":
        assert SECTION_SIGN in bad
    else:
        [(_, chunk)] = comments_and_docstrings(bad + "\n")
        assert MEASURED.search(chunk)


def test_slug_matches_githubs_anchors() -> None:
    assert slug("UpdateContainers and the runtime's lock") == (
        "updatecontainers-and-the-runtimes-lock")
    assert slug("Fail closed: the runtime's default validator") == (
        "fail-closed-the-runtimes-default-validator")
    assert slug("6. Security notes") == "6-security-notes"
    assert slug("`webhooks[]`") == "webhooks"
