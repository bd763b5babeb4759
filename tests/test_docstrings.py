"""Module docstrings name only what exists, and carry no "issue N" history.

- A module docstring in `bridge/` or `policy_server/` that names a function (`name()`), a
  class, a function or a constant in backticks, a dotted name (`bridge.contract.catalogue`,
  `Engine.evaluate`) or a module file (`cache.py`, `contract/node_fold.py`) names something
  that exists. A name is looked up in the module itself, then in its package, then in the
  project (every module, and every top-level and class-level name of every module); a
  dotted name's first part is resolved that way and the rest as attributes of what it found.
  Names of the standard library, the dependencies and the builtins count as existing.
- Class and function docstrings likewise (their own parameters count as existing).
- Every public module-level function of the products has a caller in the products (outside
  the APIs for other people: the SDK, the test kit, the simulator): one only tests call is a
  test helper shipped in the product, and lives in tests/.
- No docstring or comment in `bridge/` or `policy_server/` cites an issue ("issue 34"):
  why the code is as it is belongs in the code's words, its history in git and docs/.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import io
import re
import sys
import tokenize
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from tests.source_tree import parsed, parsed_source, source_text

ROOT = Path(__file__).resolve().parents[1]
PRODUCTS = ("bridge", "policy_server")
GENERATED = ROOT / "bridge" / "proto"

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
DOTTED = rf"{IDENT}(?:\.{IDENT})*"
# `name`, ``name``, `a.b`, `f()`, `C.m()`: a code name in backticks (the rest, such as flags,
# paths, expressions and YAML, is prose).
BACKTICKED = re.compile(rf"(?<!`)`{{1,2}}({DOTTED})(\(\))?`{{1,2}}(?!`)")
# A module file: `cache.py`, contract/catalogue.py, bridge/webhooks/client.py.
MODULE_FILE = re.compile(r"(?<![\w/.-])((?:[\w]+/)*[\w]+\.pyi?)\b")
# f() and a.b() outside backticks (with empty parentheses: prose has "time(s)").
CALLED = re.compile(rf"(?<![\w.`])({DOTTED})\(\)")
# bridge.x.y and policy_server.x outside backticks.
PRODUCT_DOTTED = re.compile(rf"(?<![\w.`/])((?:bridge|policy_server)(?:\.{IDENT})+)")
# A class name as Python spells one: two humps or more (`PolicyClient`, `NodeView`).
CLASS_NAME = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+")
# Names of other projects that docstrings cite in code style: NRI's Go code, systemd's D-Bus
# API, Kubernetes' kinds, CEL's functions and cel-spec's messages.
FOREIGN = frozenset({
    "AdjustResources", "WithResources", "MergeFrom", "AddLinuxResourcesHugepageLimit",
    "AddLinuxResourcesUnified", "AddLinuxResourcesDevice", "SetUnitProperties", "MemoryMax",
    "NodePolicy", "StateChange", "nri.pkg.api.v1alpha1.Bogus", "has", "l.sum", "l.min", "l.max",
    "l.isSorted", "cel.expr.CheckedExpr", "ParsedExpr", "Quantity.Value", "getrandom",
    "RunPodSandbox", "CreateContainer", "my_policy.py",
})
# "issue 34", "Issue #7", "issues 25 and 27", "issue-33".
ISSUE = re.compile(r"\b[Ii]ssues?[ -]#?\d+")


@dataclass
class Module:
    name: str  # dotted: bridge.webhooks.client
    path: Path
    names: set[str] = field(default_factory=set)  # top-level: defs, classes, assignments, imports
    imports: dict[str, str] = field(default_factory=dict)  # local name -> what it imports
    classes: dict[str, set[str]] = field(default_factory=dict)  # class -> its members
    stars: list[str] = field(default_factory=list)  # modules it imports * from

    @property
    def package(self) -> str:
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return [n for elt in node.elts for n in _targets(elt)]
    return []


def _bound(body: list[ast.stmt]) -> set[str]:
    """The names a module or class body binds."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(n for target in node.targets for n in _targets(target))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            names.update(_targets(node.target))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.If | ast.Try):
            names |= _bound(node.body) | _bound(node.orelse)
            for handler in getattr(node, "handlers", []):
                names |= _bound(handler.body)
    return names


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _read(path: Path) -> Module:
    tree = parsed(path)
    module = Module(_module_name(path), path, _bound(tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            members = _bound(node.body)
            for fn in node.body:  # attributes set in methods: self.x = ...
                if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    for sub in ast.walk(fn):
                        if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                                and isinstance(sub.value, ast.Name) and sub.value.id == "self"):
                            members.add(sub.attr)
            module.classes.setdefault(node.name, set()).update(members)
        elif isinstance(node, ast.ImportFrom) and node.col_offset == 0:
            base = node.module or ""
            if node.level:
                package = module.package.split(".")
                package = package[:len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            for alias in node.names:
                if alias.name == "*":
                    module.stars.append(base)
                else:
                    module.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import) and node.col_offset == 0:
            for alias in node.names:
                module.imports[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0])
    return module


@cache
def project() -> dict[str, Module]:
    """Every module of the products by dotted name (the generated ones from their stubs)."""
    found: dict[str, Module] = {}
    for product in PRODUCTS:
        for path in sorted((ROOT / product).rglob("*.py")):
            stub = path.with_suffix(".pyi")
            found[_module_name(path)] = _read(stub if stub.is_file() else path)
    return found


@cache
def project_names() -> frozenset[str]:
    """Every module's last name, and every top-level and class-level name."""
    names: set[str] = set()
    for module in project().values():
        names.add(module.name.rpartition(".")[2])
        names |= module.names
        for cls, members in module.classes.items():
            names.add(cls)
            names |= members
    return frozenset(names)


@cache
def classes() -> dict[str, frozenset[str]]:
    """Class name -> the members of every class of that name in the project."""
    members: dict[str, set[str]] = defaultdict(set)
    for module in project().values():
        for cls, names in module.classes.items():
            members[cls] |= names
    return {cls: frozenset(names) for cls, names in members.items()}


@cache
def external(name: str) -> bool:
    """A builtin, or a top-level module of the standard library or an installed package."""
    if name in dir(builtins) or name in sys.stdlib_module_names:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _submodule(package: str, name: str) -> str | None:
    candidate = f"{package}.{name}" if package else name
    return candidate if candidate in project() else None


def _attribute_exists(owner: str, rest: list[str]) -> bool:
    """`rest` as attributes of the module or class `owner` (a dotted module, or a class)."""
    if not rest:
        return True
    head, tail = rest[0], rest[1:]
    if owner in project():
        module = project()[owner]
        if (sub := _submodule(owner, head)) is not None:
            return _attribute_exists(sub, tail)
        if head in module.classes:
            return _class_member(head, tail)
        if head in module.imports:
            return _target_exists(module.imports[head], tail)
        if head in module.names:
            return True  # a value: its attributes are not checked
        return any(_target_exists(star, rest) for star in module.stars)
    return _class_member(owner, rest)


def _class_member(cls: str, rest: list[str]) -> bool:
    if not rest:
        return cls in classes()
    return cls in classes() and rest[0] in classes()[cls]  # deeper: a value's attributes


def _target_exists(target: str, rest: list[str]) -> bool:
    """What an import names (`bridge.contract.quantity`, `policy_server.sdk.merge`)."""
    parts = target.split(".")
    if parts[0] not in PRODUCTS:
        return True  # another library: not ours to check
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in project():
            return _attribute_exists(prefix, parts[cut:] + rest)
    return False


def name_exists(module: Module, dotted: str, strict: bool = True) -> bool:
    """`dotted` as the docstring of `module` means it: see this file's docstring. Not
    `strict` (a backticked dotted name), a first part the project does not know passes."""
    parts = dotted.split(".")
    head, rest = parts[0], parts[1:]
    if head in PRODUCTS:
        return _target_exists(dotted, [])
    # The module itself.
    if head in module.classes:
        return _class_member(head, rest)
    if head in module.imports:
        return _target_exists(module.imports[head], rest)
    if head in module.names:
        return True
    # Its package, and the packages above it (`contract.node_fold` from bridge/nri).
    package = module.package
    while package:
        if (sub := _submodule(package, head)) is not None:
            return _attribute_exists(sub, rest)
        if head in project()[package].names:
            return _attribute_exists(package, parts)
        package = package.rpartition(".")[0]
    # The project, then the rest of the world.
    if head in classes():
        return _class_member(head, rest)
    if head in project_names():
        return True
    return external(head) or not strict


def file_exists(module: Module, relative: str) -> bool:
    """`cache.py` or `contract/node_fold.py`: in the module's package or a package above
    it, from the repository's root, or (a bare name) anywhere in the products."""
    package = module.path.parent
    for base in (package, *[p for p in package.parents if ROOT in (p, *p.parents)]):
        if (base / relative).is_file():
            return True
    if "/" not in relative:
        return any(m.path.name == relative or m.path.with_suffix(".py").name == relative
                   for m in project().values())
    return False


def _prose(docstring: str) -> str:
    """The docstring without its code examples (lines indented by four spaces or more)."""
    return "\n".join(line for line in docstring.splitlines() if not line.startswith("    "))


def references(docstring: str) -> tuple[list[str], list[str]]:
    """What a docstring names that must exist: module files, calls (`f()`, `C.m()`), dotted
    names of the products, backticked class names (`PolicyClient`: two humps or more), and
    backticked dotted names whose first part is the project's (`Engine.evaluate`,
    `contract.node_fold`); the other backticked words are prose (keys, flags, commands)."""
    text = _prose(docstring)
    names = [m.group(1) for m in CALLED.finditer(text)]
    names += [m.group(1) for m in PRODUCT_DOTTED.finditer(text)]
    for m in BACKTICKED.finditer(text):
        name, called = m.group(1), m.group(2)
        if name.endswith((".py", ".pyi")):
            continue  # a module file
        if called or "." in name or CLASS_NAME.fullmatch(name):
            names.append(name)
    return [n for n in names if n not in FOREIGN], MODULE_FILE.findall(text)


def unresolved(module: Module, docstring: str) -> list[str]:
    """The names and module files in `docstring` that do not exist, seen from `module`."""
    names, files = references(docstring)
    strict = set(CALLED.findall(_prose(docstring))) | {
        n for n in names if n.split(".")[0] in PRODUCTS or "." not in n}
    missing = [name for name in names if not name_exists(module, name, name in strict)]
    missing += [path for path in files if not file_exists(module, path)]
    return missing


def checked_modules() -> list[Module]:
    return [m for m in project().values() if GENERATED not in m.path.parents]


def module_docstring(module: Module) -> str:
    return ast.get_docstring(parsed(module.path)) or ""


# -- the checks ------------------------------------------------------------------------------

def test_module_docstrings_name_only_what_exists() -> None:
    missing: list[str] = []
    checked = 0
    for module in checked_modules():
        docstring = module_docstring(module)
        checked += sum(map(len, references(docstring)))
        missing += [f"{module.path.relative_to(ROOT)}: {name}"
                    for name in unresolved(module, docstring)]
    assert checked > 400, "the docstrings name code in backticks: the reader finds none"
    assert not missing, "module docstrings name what does not exist:\n" + "\n".join(missing)


def _parameters(node: ast.AST) -> set[str]:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    args = node.args
    return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                            *filter(None, [args.vararg, args.kwarg])]}


def inner_docstrings(module: Module) -> list[tuple[str, str, set[str]]]:
    """(qualified name, docstring, parameters) of every class and function in `module`."""
    found = []
    for node in ast.walk(parsed(module.path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            docstring = ast.get_docstring(node)
            if docstring:
                found.append((node.name, docstring, _parameters(node)))
    return found


def test_class_and_function_docstrings_name_only_what_exists() -> None:
    """Below the module docstring too: a docstring naming a function, attribute or module that
    does not exist (its own parameters count as existing)."""
    missing = [f"{module.path.relative_to(ROOT)}:{name}: {ref}"
               for module in checked_modules()
               for name, docstring, params in inner_docstrings(module)
               for ref in unresolved(module, docstring)
               if ref.split(".")[0] not in params and ref not in FOREIGN]
    assert not missing, "docstrings name what does not exist:\n" + "\n".join(missing)


def test_a_method_docstring_naming_a_stale_path_fails() -> None:
    module = project()["policy_server.engine.evaluate"]
    assert unresolved(module, "the server's: ``engine.settle.Settled.reply``") == [
        "engine.settle.Settled.reply"]
    assert unresolved(module, "the server's: ``engine.settled.Settled.reply``") == []


def issue_citations(source: str) -> list[str]:
    """Every docstring and comment of `source` that cites an issue number, as `line: text`."""
    found: list[str] = []
    for node in ast.walk(parsed_source(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and (hit := ISSUE.search(doc)):
                found.append(f"{node.body[0].lineno}: {hit.group(0)}")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and (hit := ISSUE.search(token.string)):
            found.append(f"{token.start[0]}: {hit.group(0)}")
    return found


def test_no_issue_numbers_in_docstrings_or_comments() -> None:
    found = [f"{m.path.relative_to(ROOT)}:{hit}" for m in checked_modules()
             for hit in issue_citations(source_text(m.path))]
    assert not found, ("say why in the code's words; history belongs in git and docs/:\n"
                       + "\n".join(found))


# -- the checks can fail ---------------------------------------------------------------------

@cache
def _subject() -> Module:
    """A real module to mutate: the bridge's module whose docstring names the most."""
    bridge = [m for m in checked_modules() if m.name.startswith("bridge.")]
    return max(bridge, key=lambda m: (sum(map(len, references(module_docstring(m)))), m.name))


@pytest.mark.parametrize("mutation", [
    "Calls `no_such_function()` for each webhook.",
    "Calls no_such_function() for each webhook.",
    "Builds a ``NoSuchClass`` per call.",
    "See `bridge.webhooks.no_such_module`.",
    "See bridge.contract.catalogue.NO_SUCH_TABLE for the events.",
    "Uses `contract.no_such_module` for the table.",
    "Calls `Engine.no_such_method()` per request.",
    "Kept in `no_such_module.py`.",
])
def test_a_docstring_naming_what_does_not_exist_fails(mutation: str) -> None:
    real = module_docstring(_subject())
    assert unresolved(_subject(), real) == []
    assert len(unresolved(_subject(), f"{real}\n\n{mutation}")) == 1


@pytest.mark.parametrize("text", [
    "Calls `PolicyClient.post()` (`client.py`) once per webhook.",
    "The catalogue (bridge.contract.catalogue.CATALOGUE) and `asyncio.timeout`.",
    "Flags such as `--log-format`, paths like `/v1/policies/<name>` and `a + b` are prose.",
    "`len()` and `dict` are builtins; `msgspec.Struct` is a dependency's.",
])
def test_names_that_exist_pass(text: str) -> None:
    assert unresolved(_subject(), text) == []


def test_an_issue_number_in_a_docstring_or_comment_fails() -> None:
    source = ('"""The relay (issue 25)."""\n\n'
              "def f() -> None:\n"
              '    """Counted once (Issue #34)."""\n'
              "    x = 1  # see issues 25 and 27\n"
              '    y = "issue 3 in a string is data"\n')
    assert issue_citations(source) == ["1: issue 25", "4: Issue #34", "5: issues 25"]
    assert issue_citations('"""An issue of containerd; 3 issues."""\n') == []


# -- product functions no product code calls ---------------------------------------------------

# Packages whose public functions are an API for people outside the products (policy authors,
# plugin authors testing on the simulator), so a caller in tests only is expected.
PUBLIC_API = ("policy_server/sdk/", "policy_server/testing/", "bridge/simulator/")


def _product_sources() -> dict[str, str]:
    """Every product module's source by its path in the repository."""
    return {p.relative_to(ROOT).as_posix(): source_text(p)
            for product in PRODUCTS for p in sorted((ROOT / product).rglob("*.py"))
            if GENERATED not in p.parents}


def _names_used(tree: ast.AST) -> set[str]:
    """Every name a module mentions: names, attributes, imports, and identifier strings
    (`__all__`, a function looked up by name)."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.alias):
            used.add(node.name.rsplit(".", 1)[-1])
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and node.value.isidentifier()):
            used.add(node.value)
    return used


def only_test_callers(sources: dict[str, str]) -> list[str]:
    """Public module-level functions of `sources` (path -> text) whose name no product module
    uses (outside PUBLIC_API)."""
    defined: dict[str, str] = {}
    used: set[str] = set()
    for relative, text in sources.items():
        tree = parsed_source(text)
        for node in tree.body:
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and not node.name.startswith("_")
                    and not relative.startswith(PUBLIC_API)):
                defined[node.name] = f"{relative}:{node.name}"
        used |= _names_used(tree)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    used |= set(re.findall(IDENT, pyproject))  # console scripts name their functions
    return sorted(where for name, where in defined.items() if name not in used)


def test_every_public_product_function_has_a_product_caller() -> None:
    """A function only tests call is a test helper shipped in the product: it belongs in tests/
    (or is dead)."""
    assert only_test_callers(_product_sources()) == []


def test_a_function_only_tests_call_is_found() -> None:
    sources = _product_sources()
    where = "bridge/contract/request_body.py"
    sources[where] += "\n\ndef only_a_test_calls_this() -> None:\n    pass\n"
    assert only_test_callers(sources) == [f"{where}:only_a_test_calls_this"]
