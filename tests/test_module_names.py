"""Module names say one thing each, and what the docs say about modules is true.

- No two modules of `bridge/` and `policy_server/` share a basename (`__init__.py` aside): a
  name like `model.py` or `errors.py` in two packages makes every traceback, grep and review
  ask "which one?".
- Every module a package docstring's "Owns" part names (a backticked name, relative to the
  package, or dotted from `bridge.`/`policy_server.`) exists. The check reads the docstrings,
  so it follows packages wherever they move.
- Every `bridge/...py`, `policy_server/...py`, `tests/...py` or `benchmarks/...py` path
  written in the repository's text exists (tests move with the modules they test).
- No two public module-level classes of both products share a name, and no two public
  module-level functions do, except the role names modules implement by convention
  (`ROLE_FUNCTIONS`, each with its reason): `Target` in four modules makes every import,
  traceback and review ask "which one?". Where one of a pair is the policy SDK's public name
  (`policy_server.sdk`), the other one is renamed. `STILL_SHARED_*` lists the pairs not yet
  renamed, each with its reason; it may only shrink (an entry no longer shared fails).
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

from tests.source_tree import parsed, parsed_source, source_text

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


# Function names that modules implement by convention: a caller picks the module, the name
# says the role. Each entry: the reason the name repeats.
ROLE_FUNCTIONS: dict[str, str] = {
    "main": "a command module's or generator's entry point (`python -m ...`, console script)",
    "add_arguments": "a subcommand module adds its flags to the CLI's subparser (bridge/cli.py)",
    "build": "a policy module builds its Policy from a config (the CATALOGUE's factories), and a "
             "generator builds the document it writes",
    "pod": "a koordinator hook module's pod-level step (koordinator_qos/hooks/, by name)",
    "container": "a koordinator hook module's container-level step (koordinator_qos/hooks/, by "
                 "name), and a manifest module's container builder",
    "render": "a generated file's module renders its text (`make generate` / the drift tests)",
    "write": "a generated file's module writes its file (`make generate`)",
}

# Public names still defined in more than one module, each with its reason. This list only
# shrinks: rename one of the pair and delete its line (a line whose name is no longer shared
# fails the test).
STILL_SHARED_CLASSES: dict[str, str] = {
    "Adjustment": (
        "the bridge's contract classes (bridge/contract/reply_models.py, "
        "bridge/contract/request_structs.py) name the $defs of the published JSON Schemas "
        "(schemas/webhook/*.json): renaming them changes the public contract files; the SDK's "
        "name stays"),
    "Eviction": (
        "the bridge's contract classes (bridge/contract/reply_models.py) name the $defs of "
        "the published JSON Schemas (schemas/webhook/*.json): renaming them changes the "
        "public contract files; the SDK's name stays"),
    "Update": (
        "the bridge's contract classes (bridge/contract/reply_models.py, "
        "bridge/contract/request_structs.py) name the $defs of the published JSON Schemas "
        "(schemas/webhook/*.json): renaming them changes the public contract files; the SDK's "
        "name stays"),
}
STILL_SHARED_FUNCTIONS: dict[str, str] = {
    "refusal": (
        "not yet renamed: policy_server/engine/request_fields.py, "
        "policy_server/policies/cel/mutation_check.py (its only callers are tests: renamed, "
        "it fails the product-caller check of tests/test_docstrings.py until it moves)"),
}


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
        docstring = ast.get_docstring(parsed(init)) or ""
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
    assert module_exists(webhooks, "webhook_handler")
    assert module_exists(webhooks, "bridge.contract.request_body")
    assert module_exists(ROOT / "bridge", "contract")
    assert not module_exists(webhooks, "payload")
    assert not module_exists(webhooks, "bridge.webhooks.merge")


def public_definitions(sources: dict[str, str]) -> tuple[dict[str, list[str]],
                                                          dict[str, list[str]]]:
    """Module-level public class and function names of each module ({path: source}), each
    name with the modules that define it."""
    classes: dict[str, list[str]] = defaultdict(list)
    functions: dict[str, list[str]] = defaultdict(list)
    for path, source in sources.items():
        for node in parsed_source(source).body:
            if node_name := getattr(node, "name", ""):
                if node_name.startswith("_"):
                    continue
                if isinstance(node, ast.ClassDef):
                    classes[node_name].append(path)
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    functions[node_name].append(path)
    return classes, functions


def shared(definitions: dict[str, list[str]], allowed: set[str]) -> dict[str, list[str]]:
    return {name: paths for name, paths in definitions.items()
            if len(paths) > 1 and name not in allowed}


@cache
def product_definitions() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    return public_definitions({p.relative_to(ROOT).as_posix(): source_text(p)
                               for p in modules()})


def test_public_class_names_are_unique_across_both_products() -> None:
    classes, _ = product_definitions()
    assert len(classes) > 200, "the scan reads the products' classes"
    repeated = shared(classes, set(STILL_SHARED_CLASSES))
    assert not repeated, "give each class a name that says what it holds:\n" + "\n".join(
        f"{name}: {', '.join(paths)}" for name, paths in sorted(repeated.items()))


def test_public_function_names_are_unique_except_role_names() -> None:
    _, functions = product_definitions()
    assert len(functions) > 300, "the scan reads the products' functions"
    repeated = shared(functions, set(ROLE_FUNCTIONS) | set(STILL_SHARED_FUNCTIONS))
    assert not repeated, "give each function a name that says what it does (or declare a " \
        "role in ROLE_FUNCTIONS, with its reason):\n" + "\n".join(
            f"{name}: {', '.join(paths)}" for name, paths in sorted(repeated.items()))


def test_the_lists_of_shared_names_only_shrink() -> None:
    classes, functions = product_definitions()
    stale = [f"class {name}" for name in STILL_SHARED_CLASSES if len(classes[name]) < 2]
    stale += [f"function {name}" for name in STILL_SHARED_FUNCTIONS if len(functions[name]) < 2]
    stale += [f"role {name}" for name in ROLE_FUNCTIONS if len(functions[name]) < 2]
    assert not stale, "no longer shared: delete from the list:\n" + "\n".join(stale)
    for reasons in (ROLE_FUNCTIONS, STILL_SHARED_CLASSES, STILL_SHARED_FUNCTIONS):
        assert all(reason.strip() for reason in reasons.values()), "each entry gives a reason"


def test_the_scan_finds_a_repeated_public_name_and_ignores_private_and_nested_ones() -> None:
    sources = {
        "a.py": "class Target: pass\ndef plan(): pass\ndef main(): pass\nclass _Hidden: pass\n",
        "b.py": "class Target:\n    class Inner: pass\n    def plan(self): pass\n"
                "def main(): pass\nclass _Hidden: pass\n",
        "c.py": "async def plan(): pass\nclass Inner: pass\n",
    }
    classes, functions = public_definitions(sources)
    assert shared(classes, set()) == {"Target": ["a.py", "b.py"]}
    assert shared(functions, {"main"}) == {"plan": ["a.py", "c.py"]}
    assert shared(functions, set()) == {"plan": ["a.py", "c.py"], "main": ["a.py", "b.py"]}
