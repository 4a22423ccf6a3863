"""A package's face that loads its names on first use (PEP 562), so importing the package costs nothing.

`mtl --help` imports `mtl_graph.config` and `mtl_graph.core`; `import mtl_graph` must not pull in LangChain or
Qdrant. Each face lists its public names and the module that defines each; a name is imported when first read and
then kept in the package's namespace, so later reads are plain attribute lookups."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of a package face: `where` maps each public name to its module (absolute,
    or relative to the package when it starts with a dot)."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(where[name], package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
