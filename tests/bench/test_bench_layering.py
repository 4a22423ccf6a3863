"""Imports run one way: the CLI calls the evaluation harness, the harness never imports the CLI (the `mtl eval ...`
commands are its one entry point)."""

from __future__ import annotations

import ast
from pathlib import Path

import mtl_graph.bench

BENCH = Path(mtl_graph.bench.__file__).parent


def imported(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_no_bench_module_imports_the_cli() -> None:
    files = sorted(BENCH.rglob("*.py"))
    assert len(files) > 10
    found = {str(p.relative_to(BENCH)): sorted(m for m in imported(p) if m.split(".")[:2] == ["mtl_graph", "cli"])
             for p in files}
    assert {path: mods for path, mods in found.items() if mods} == {}


def test_no_bench_module_is_a_program_of_its_own() -> None:
    programs = [str(p.relative_to(BENCH)) for p in BENCH.rglob("*.py")
                if 'if __name__ == "__main__"' in p.read_text(encoding="utf-8") or p.name == "__main__.py"]
    assert programs == []
