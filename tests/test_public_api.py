"""The package's face: one import for users, loaded lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mtl_graph

ISSUE_NAMES = ["build_mtl_graph", "with_memory_transfer", "MemoryTransferMiddleware", "MemoryPool", "PoolStore", "Task",
               "ScriptedChatModel"]


def test_the_users_names_come_from_one_import() -> None:
    from mtl_graph import (MemoryPool, MemoryTransferMiddleware, PoolStore, ScriptedChatModel, Task,  # noqa: F401
                           build_mtl_graph, with_memory_transfer)

    assert set(ISSUE_NAMES) <= set(mtl_graph.__all__)


@pytest.mark.parametrize("name", mtl_graph.__all__)
def test_each_public_name_is_the_object_its_module_defines(name: str) -> None:
    value = getattr(mtl_graph, name)
    module = sys.modules[mtl_graph._WHERE[name]]
    assert getattr(module, name) is value
    assert getattr(value, "__module__", module.__name__) == module.__name__  # defined there, not re-exported


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'build_graph'"):
        mtl_graph.build_graph  # noqa: B018
    with pytest.raises(ImportError):
        exec("from mtl_graph import MemoryPol", {})


def test_importing_the_package_loads_no_framework() -> None:
    code = ("import sys, mtl_graph; heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'langchain', 'langchain_core', 'langgraph', 'qdrant_client', 'qdrant_edge', 'onnxruntime', 'pydantic'}); "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
