"""No import circles inside wirelessfl (and wirelessfl_papers): the module import graph, read with ast, is acyclic.

Every import statement counts, at module level or inside a function: an import
deferred into a function to dodge a circle is still a circle in the design.
``from package import name`` points at the submodule when ``name`` is one,
else at the package (whose ``__init__`` defines ``name``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("wirelessfl", "wirelessfl_papers")


def modules(root: Path, packages) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _innermost(name: str, known) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path, packages=PACKAGES) -> dict[str, set[str]]:
    """Each module of ``packages`` -> the modules of ``packages`` it imports."""
    known = modules(root, packages)
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(_innermost(alias.name, known) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    targets.add(submodule if submodule in known else _innermost(base, known))
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles():
    assert circles(import_graph(ROOT)) == []


def test_the_check_sees_a_circle_through_a_deferred_import(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .b import thing\n")
    (package / "a.py").write_text("from pkg.sub import thing\n")
    (package / "sub" / "b.py").write_text("def thing():\n    from ..a import other\n")
    (package / "c.py").write_text("from pkg import a\nimport pkg.sub.b\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.c"] == {"pkg.a", "pkg.sub.b"}  # "from pkg import a" points at the submodule, not at pkg
    assert circles(graph) == [["pkg.a", "pkg.sub", "pkg.sub.b"]]


def test_the_graph_knows_the_real_edges():
    graph = import_graph(ROOT)
    assert "wirelessfl.results.reproduction" in graph["wirelessfl_papers"]
    assert "wirelessfl.results.plotly_js" in graph["wirelessfl.results.streams"]
    assert "wirelessfl.network.physical" in graph["wirelessfl.network.model"]  # "from . import physical as phy"
