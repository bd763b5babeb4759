"""No module of `bridge/` or `policy_server/` imports itself back, by any path.

The import contracts (.importlinter) order the packages; they do not see a cycle inside one
package (the simulator's runtime, CRI server and CRI calls were one), nor one closed by an
import that runs later: inside a function, or under `TYPE_CHECKING`. Both still tie the modules
together: neither can be read, tested or moved without the other. So every import statement
counts here, wherever it stands in the module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from functools import cache
from pathlib import Path

from tests.source_tree import parsed

ROOT = Path(__file__).resolve().parents[1]
PRODUCTS = ("bridge", "policy_server")
GENERATED = ROOT / "bridge" / "proto"

Graph = Mapping[str, frozenset[str]]


def module_files() -> dict[str, Path]:
    files = {}
    for product in PRODUCTS:
        for path in (ROOT / product).rglob("*.py"):
            if GENERATED in path.parents:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def _known(name: str, known: AbstractSet[str]) -> str | None:
    """The module `name` is, or is inside of (`pkg.mod.attr` -> `pkg.mod`)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: Iterable[str]) -> frozenset[str]:
    """Every product module `module` imports, anywhere in its text."""
    names = frozenset(modules)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            targets = [f"{origin}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            resolved = _known(target, names)
            if resolved is not None and resolved != module:
                found.add(resolved)
    return frozenset(found)


@cache
def import_graph() -> Graph:
    files = module_files()
    return {module: imports_of(module, path, files) for module, path in files.items()}


def cycles(graph: Graph) -> list[list[str]]:
    """The graph's strongly connected components of more than one module, each sorted
    (Tarjan's algorithm, iterative so a deep chain cannot exhaust the stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def test_no_module_imports_itself_back() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles (every import counts, in functions and TYPE_CHECKING " \
                        f"too): {found}"


def test_the_graph_sees_late_and_type_only_imports(tmp_path: Path) -> None:
    """The finder is not vacuous: a function-level import and a TYPE_CHECKING import close a
    cycle it reports, and a chain without a way back is none."""
    (tmp_path / "a.py").write_text("def f():\n    from pkg import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from pkg.c import C\n")
    (tmp_path / "c.py").write_text("from . import a\n")
    (tmp_path / "d.py").write_text("import pkg.a\n")
    files = {f"pkg.{p.stem}": p for p in tmp_path.glob("*.py")}
    graph = {module: imports_of(module, path, files) for module, path in files.items()}
    assert graph["pkg.d"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    graph["pkg.c"] = frozenset()
    assert cycles(graph) == []


def test_the_graph_covers_both_products() -> None:
    graph = import_graph()
    assert {m.split(".")[0] for m in graph} == set(PRODUCTS)
    assert "bridge.transport.carrier" in graph["bridge.transport.ttrpc_client"]
