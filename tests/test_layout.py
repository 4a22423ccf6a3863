"""The package layout holds by construction: imports run one way between packages and no modules import each other
in a circle. Read from the source with `ast` (every import, at module level or inside a function, TYPE_CHECKING
ones included), so a lazy import cannot hide an arrow that runs back up."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers.paths import ROOT

PACKAGE = ROOT / "mtl_graph"

LAYERS = ("core", "redaction", "llm", "sandbox", "memory", "agent", "config", "judging", "distill", "importers",
          "export", "pipeline", "bench", "cli", "live")
"""The subpackages from the ground up, as README.md's Layout lists them: each imports only those before it."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(source: str, own: str, known: set[str] | dict[str, Path]) -> set[str]:
    """The project's modules a module's source imports (`from pkg import name` is the module `pkg.name` where that
    is one, else `pkg`)."""

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("mtl_graph"):
            found.update(filter(None, (resolve(f"{node.module}.{a.name}") for a in node.names)))
        elif isinstance(node, ast.Import):
            found.update(filter(None, (resolve(a.name) for a in node.names if a.name.startswith("mtl_graph"))))
    return found - {own, "mtl_graph"}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(path.read_text(encoding="utf-8"), name, known) for name, path in known.items()}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_subpackage_has_a_place_in_the_layers() -> None:
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert subpackages == set(LAYERS), "a new subpackage takes its place in LAYERS (and README.md's Layout)"


def test_no_package_imports_one_above_it(graph: dict[str, set[str]]) -> None:
    upward = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                    if _layer(a) in LAYERS and _layer(b) in LAYERS
                    and LAYERS.index(_layer(b)) > LAYERS.index(_layer(a)))
    assert upward == []


def test_no_modules_import_each_other_in_a_circle(graph: dict[str, set[str]]) -> None:
    """Tarjan's strongly connected components: any of more than one module is a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                circles.append(sorted([v, *component]))

    for module in graph:
        if module not in index:
            visit(module)
    assert circles == []


def test_the_library_never_imports_the_served_graphs() -> None:
    """graphs/ sits on top: it is what langgraph.json serves, built from the library, never a part of it."""
    offenders = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
                 for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                 if isinstance(node, (ast.Import, ast.ImportFrom))
                 and any(n.startswith("graphs") for n in ([node.module or ""] if isinstance(node, ast.ImportFrom)
                                                          else [a.name for a in node.names]))]
    assert offenders == []


def test_the_reader_sees_lazy_and_package_imports() -> None:
    """An import inside a function is an arrow like any other; `from pkg import module` names that module."""
    known = {"mtl_graph.core.task", "mtl_graph.cli", "mtl_graph.cli.app", "mtl_graph.memory.base"}
    source = ("import typing\nfrom mtl_graph.memory.base import MemoryBase\n"
              "def f():\n    from mtl_graph.cli import app\n    import mtl_graph.core.task\n")
    assert _imports(source, "mtl_graph.core.task", known) == {"mtl_graph.memory.base", "mtl_graph.cli.app"}
