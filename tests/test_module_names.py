"""Module names say one thing each, and what the docs say about modules is true.

- No two modules of `bridge/` and `policy_server/` share a basename (`__init__.py` aside): a
  name like `model.py` or `errors.py` in two packages makes every traceback, grep and review
  ask "which one?".
- Every module a package docstring's "Owns" part names (a backticked name, relative to the
  package, or dotted from `bridge.`/`policy_server.`) exists. The check reads the docstrings,
  so it follows packages wherever they move.
- Every `bridge/...py`, `policy_server/...py`, `tests/...py` or `benchmarks/...py` path
  written in the repository's text exists (tests move with the modules they test).
"""

from __future__ import annotations

import ast
import keyword
import re
import subprocess
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCTS = ("bridge", "policy_server")
GENERATED = ROOT / "bridge" / "proto"
# A backticked module name: `name`, ``name`` or a dotted path of such names.
NAMED = re.compile(r"`{1,2}([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)`{1,2}")
# The Owns part of a docstring: from "Owns" to the end of its paragraph or to "Must not".
OWNS = re.compile(r"\bOwns\b(.*?)(?:\n\s*\n|\bMust not\b|\Z)", re.DOTALL)
# A source path, not part of a longer one (tests/policy_server/... is a test path).
SOURCE_PATH = re.compile(r"(?<![\w/.-])((?:bridge|policy_server|tests|benchmarks)/[\w/]+\.py)\b")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".txt", ".sh", ""}


def modules() -> list[Path]:
    return sorted(p for product in PRODUCTS for p in (ROOT / product).rglob("*.py")
                  if GENERATED not in p.parents)


def owned_names(docstring: str) -> list[str]:
    """The module names the docstring's Owns part mentions, in order (a keyword such as
    `try`, the command, can never be a module)."""
    return [name for part in OWNS.findall(docstring) for name in NAMED.findall(part)
            if not keyword.iskeyword(name)]


def module_exists(package_dir: Path, name: str) -> bool:
    """`name` relative to the package, or absolute when it starts with a product's name."""
    base = ROOT if name.split(".")[0] in PRODUCTS else package_dir
    path = base.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@cache
def tracked_text() -> tuple[str, ...]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    files = [f for f in out.stdout.decode().split("\0") if f]
    if not files:
        pytest.fail("git ls-files listed nothing: run the tests from a git checkout")
    return tuple(f for f in files if Path(f).suffix in TEXT_SUFFIXES
                 and not f.startswith("bridge/proto/") and (ROOT / f).is_file())


def test_no_two_modules_share_a_basename() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in modules():
        if path.name != "__init__.py":
            by_name[path.name].append(path.relative_to(ROOT).as_posix())
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not shared, "give each module a name that says its job:\n" + "\n".join(
        f"{name}: {', '.join(paths)}" for name, paths in sorted(shared.items()))


def test_every_module_a_package_owns_exists() -> None:
    missing = []
    checked = 0
    for init in modules():
        if init.name != "__init__.py":
            continue
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        for name in owned_names(docstring):
            checked += 1
            if not module_exists(init.parent, name):
                missing.append(f"{init.relative_to(ROOT).as_posix()}: `{name}`")
    assert checked > 20, "the Owns parts of the package docstrings name modules in backticks"
    assert not missing, "package docstrings name modules that do not exist:\n" + "\n".join(
        missing)


def test_every_source_path_written_in_the_repository_exists() -> None:
    missing: set[str] = set()
    for path in tracked_text():
        try:
            body = (ROOT / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        missing.update(f"{path}: {source}" for source in SOURCE_PATH.findall(body)
                       if not (ROOT / source).is_file())
    assert not missing, "paths to modules that do not exist:\n" + "\n".join(sorted(missing))


@pytest.mark.parametrize(("docstring", "names"), [
    ("Owns nothing itself: `load` (a file), ``run`` (one case).", ["load", "run"]),
    ("Owns ``Event`` and ``GET /v1/state`` (``control_client``).", ["control_client"]),
    ("Owns `a`.\n\nSee `b`.", ["a"]),
    ("Owns `a`. Must not be imported by `b`.", ["a"]),
    ("Owns `a` (`try`, `nri-webhook-bridge replay`).", ["a"]),
    ("Owns the values (`bridge.contract.request_body`).", ["bridge.contract.request_body"]),
    ("Modules: `config`.", []),
])
def test_owned_names_reads_only_the_owns_part(docstring: str, names: list[str]) -> None:
    assert owned_names(docstring) == names


def test_module_exists_resolves_relative_and_absolute_names() -> None:
    webhooks = ROOT / "bridge" / "webhooks"
    assert module_exists(webhooks, "call_sequence")
    assert module_exists(webhooks, "bridge.contract.request_body")
    assert module_exists(ROOT / "bridge", "contract")
    assert not module_exists(webhooks, "payload")
    assert not module_exists(webhooks, "bridge.webhooks.merge")
