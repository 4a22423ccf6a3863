"""A run's `namespace` setting (the Studio context, --namespace, MTL_NAMESPACE): the run retrieves from and writes
to that team's memories only; a served graph lets a client name no namespace but its own unless the server allows it."""

from __future__ import annotations

import pytest
from helpers.memory_fixtures import write_task_dir

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.core.task import Task
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.pipeline.server_policy import ServerPolicy
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool

TASK = Task(id="ns-1", domain="math", instruction="Set X in f.py to 2 so the unit test passes.",
            files={"f.py": "X = 1\n", "test_f.py": "import unittest\nimport f\n\nclass T(unittest.TestCase):\n"
                                                    "    def test(self):\n        self.assertEqual(f.X, 2)\n"},
            check="python3 -m unittest -q test_f", test_files=["test_f.py"])


def advice(title: str) -> InsightMemory:
    return InsightMemory(title=title, description="When a unit test checks a module constant.",
                         content="Set the constant, then rerun the unit test before submitting.",
                         sources=[Provenance(domain="strings", source_task_id="s1")])


@pytest.fixture()
def pool(tmp_path):
    with MemoryPool.open(tmp_path / "pool") as pool:
        pool.add(advice("Default team advice on module constants"))
        pool.in_namespace("team-a").add(advice("Team A advice on module constants"))
        yield pool


def model() -> ScriptedChatModel:
    return ScriptedChatModel(responses=[bash_call("echo 'X = 2' > f.py"), submit_call("set X")], plan="Set X.")


def test_a_run_in_a_namespace_reads_and_writes_that_namespace_only(pool, tmp_path):
    graph = build_mtl_graph(model(), pool, memory_type="insight", lifecycle="off", distill_formats=["trajectory"],
                            sandbox="bwrap", run_log=tmp_path / "runs.jsonl")
    out = graph.invoke({"task": TASK}, context={"namespace": "team-a"})
    assert out["verdict"]["status"] == "pass"
    team_a = pool.in_namespace("team-a")
    assert [team_a.get(r["id"]).title for r in out["retrieved"]] == ["Team A advice on module constants"]
    assert all(pool.get(i) is None and team_a.get(i) is not None for i in out["new_memory_ids"])
    assert team_a.get(out["retrieved"][0]["id"]).stats.retrieved == 1  # credited in its own namespace
    assert len(pool) == 1  # the default namespace is as it was


def test_a_served_graph_refuses_a_namespace_it_does_not_allow(pool, tmp_path):
    task_dir = tmp_path / "root" / "t"
    write_task_dir(TASK, task_dir)
    roots = ((tmp_path / "root").resolve(),)

    def served(allowed=()):
        return build_mtl_graph(model(), pool, memory_type="insight", lifecycle="off", distill_formats=["trajectory"],
                               sandbox="bwrap", run_log=tmp_path / "runs.jsonl", workspace_root=tmp_path / "ws",
                               policy=ServerPolicy(task_roots=roots, allowed_namespaces=allowed))

    before = len(pool.in_namespace("team-a"))
    out = served().invoke({"task": str(task_dir)}, context={"namespace": "team-a"})
    assert out["error_kind"] == "refused" and "MTL_ALLOWED_NAMESPACES (none)" in out["error"]
    assert out["trajectory"] is None and len(pool.in_namespace("team-a")) == before  # nothing ran, nothing written
    for memory_type in ("none", "insight"):  # refused whatever the run would retrieve
        out = served().invoke({"task": str(task_dir)}, context={"namespace": "team-a", "memory_type": memory_type})
        assert out["error_kind"] == "refused"
    out = served(allowed=("team-a",)).invoke({"task": str(task_dir)}, context={"namespace": "team-a"})
    assert out["error"] is None and out["verdict"]["status"] == "pass"
    assert len(pool.in_namespace("team-a")) == before + 1
    own = served().invoke({"task": str(task_dir)}, context={"namespace": "default"})  # its own: always allowed
    assert own["error"] is None
