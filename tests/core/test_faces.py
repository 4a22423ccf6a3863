"""A package face loads each public name from its module when first read, and only then."""

import subprocess
import sys
import types

import pytest

from mtl_graph.core.faces import lazy_names


def test_a_name_is_imported_when_read_and_then_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    face = types.ModuleType("face_under_test")
    face.__path__ = []  # a package, so relative module names resolve against it
    monkeypatch.setitem(sys.modules, "face_under_test", face)
    face.__getattr__, face.__dir__ = lazy_names("face_under_test", {"dumps": "json", "sqrt": "math"})
    assert "dumps" not in vars(face)
    import json

    assert face.dumps is json.dumps and vars(face)["dumps"] is json.dumps
    assert {"dumps", "sqrt"} <= set(dir(face))
    with pytest.raises(AttributeError, match="'face_under_test' has no attribute 'loads'"):
        face.loads


def test_the_faces_import_nothing_heavy_until_a_name_is_read() -> None:
    code = ("import sys\nimport mtl_graph, mtl_graph.core, mtl_graph.config, mtl_graph.agent\n"
            "heavy = [m for m in ('langchain_core', 'langgraph', 'qdrant_client', 'pydantic') if m in sys.modules]\n"
            "assert not heavy, heavy\nfrom mtl_graph.agent import AgentConfig\nfrom mtl_graph import Task\n"
            "assert AgentConfig.__module__ == 'mtl_graph.agent.config' and Task.__module__ == 'mtl_graph.core.task'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
