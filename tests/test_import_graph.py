"""No import circles inside wirelessfl (and wirelessfl_papers): the module import graph, read with ast, is acyclic;
and wirelessfl's modules import downwards only, through the layers of ``LAYERS`` (seam < network, learning <
declarations < results < config < algorithms < run < cost < run.prepare < simulate < sweep, tune < api < cli).

Every import statement counts, at module level or inside a function: an import
deferred into a function to dodge a circle is still a circle in the design.
``from package import name`` points at the submodule when ``name`` is one,
else at the package (whose ``__init__`` defines ``name``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


# The layers of wirelessfl, lowest first: a module may import its own layer and the ones below, never one above,
# at module level or inside a function. Each entry names modules or packages (all their submodules); a module
# belongs to the layer of its longest matching entry, and every module must have one.
LAYERS = (
    ("foundations", ("wirelessfl.seam", "wirelessfl.user_code", "wirelessfl.results.io")),
    # what each algorithm is (typed parameters, search space, client bounds, memory footprint), torch-free; the
    # registry imports an implementation by its dotted path only when a run needs it
    ("algorithm declarations", (
        "wirelessfl.algorithms.spec", "wirelessfl.algorithms.search_space", "wirelessfl.algorithms.specs",
        "wirelessfl.algorithms.registry",
    )),
    ("network and learning", ("wirelessfl.network", "wirelessfl.learning")),
    # torch-free declarations, and the levers' leaf modules that config validates against and algorithms run
    ("declarations", (
        "wirelessfl.tune.space", "wirelessfl.algorithms.scheduling", "wirelessfl.algorithms.compression",
        "wirelessfl.algorithms.over_the_air", "wirelessfl.algorithms.server_optimizer", "wirelessfl.algorithms.asynchronous",
        "wirelessfl.accounting",
        "wirelessfl.checkpoint",
    )),
    ("results", ("wirelessfl.results",)),  # reads a run's tables, never the code that made them
    ("config", ("wirelessfl.config",)),
    ("algorithms", ("wirelessfl.algorithms",)),
    ("run", ("wirelessfl.run",)),
    ("cost", ("wirelessfl.cost",)),
    ("prepare", ("wirelessfl.run.prepare",)),
    ("simulate", ("wirelessfl.simulate",)),
    ("sweep and tune", ("wirelessfl.sweep", "wirelessfl.tune")),
    ("api", ("wirelessfl.api",)),
    ("doors", ("wirelessfl.cli", "wirelessfl.__main__", "wirelessfl.progress_lines", "wirelessfl")),
)

def layer_of(module: str, layers=LAYERS) -> int:
    """The index in ``layers`` of ``module``'s longest matching entry (a package's entry covers its submodules;
    the root package only itself)."""
    best, length = None, -1
    for index, (_, entries) in enumerate(layers):
        for entry in entries:
            root = "." not in entry
            if (module == entry or (not root and module.startswith(entry + "."))) and len(entry) > length:
                best, length = index, len(entry)
    if best is None:
        raise AssertionError(f"{module}: in no layer; add it to LAYERS in tests/test_import_graph.py")
    return best


def back_arrows(graph: dict[str, set[str]], layers=LAYERS) -> set[tuple[str, str]]:
    """Every import from a module to a module of a higher layer."""
    return {
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if layer_of(target, layers) > layer_of(module, layers)
    }


def test_no_module_imports_a_higher_layer():
    graph = import_graph(ROOT, ("wirelessfl",))
    assert back_arrows(graph) == set()


def test_the_layer_check_sees_a_back_arrow_inside_a_function(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def late():\n    from pkg.high import thing\n")
    (package / "high.py").write_text("from pkg import low\n\ndef thing():\n    return low\n")
    layers = (("low", ("pkg.low",)), ("high", ("pkg.high", "pkg")))
    graph = import_graph(tmp_path, ("pkg",))
    assert back_arrows(graph, layers) == {("pkg.low", "pkg.high")}


def test_every_module_has_a_layer_and_the_root_covers_only_itself():
    for module in modules(ROOT, ("wirelessfl",)):
        layer_of(module)
    assert LAYERS[layer_of("wirelessfl.run.prepare")][0] == "prepare"
    assert LAYERS[layer_of("wirelessfl.run.unit")][0] == "run"
    with pytest.raises(AssertionError, match="wirelessfl.elsewhere: in no layer"):
        layer_of("wirelessfl.elsewhere", (("doors", ("wirelessfl",)),))
