"""Progress through LangGraph's custom stream: the events of a scripted run, in order, and the CLI rendering them."""

import json

import pytest
from langchain_core.messages import AIMessage
from typer.testing import CliRunner

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, load_action_script, submit_call
from mtl_graph.cli import app
from mtl_graph.pipeline import MTLContext, build_mtl_graph
from mtl_graph.pipeline.events import emit
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from helpers.memory_fixtures import seeded
from helpers.paths import EXAMPLES

PLAN = "Read slug.py and its tests, rewrite slugify, run the unit tests, submit when they pass."


def custom_events(graph, task, **kwargs) -> tuple[list[dict], dict]:
    events, final = [], {}
    for mode, chunk in graph.stream({"task": task}, stream_mode=["updates", "custom", "values"], **kwargs):
        if mode == "custom":
            events.append(chunk)
        elif mode == "values":
            final = chunk
    return events, final


def test_a_run_streams_its_events_in_order(pool, tmp_path):
    memory = seeded(pool)
    script = load_action_script(EXAMPLES / "slugify" / "demo_script.json")
    graph = build_mtl_graph(ScriptedChatModel(responses=[AIMessage(PLAN), *script]), pool, memory_type="insight",
                            distill_formats=["trajectory"], run_log=tmp_path / "runs.jsonl")
    events, out = custom_events(graph, str(EXAMPLES / "slugify"))

    assert [e["kind"] for e in events] == ["plan", "retrieved", "retrieval", "step", "step", "step", "step", "agent",
                                           "verdict", "written", "credited"]
    assert json.loads(json.dumps(events)) == events  # JSON-friendly as they are (Studio, HTTP clients)
    plan, found, trace, *steps, agent, verdict, written, credited = events
    assert trace["injected"] == [memory.id] and trace["lifecycle"] == "on" and trace["floor"] is not None
    assert plan["query"] == PLAN
    assert found["refresh"] is False and [m["id"] for m in found["memories"]] == [memory.id]
    assert found["memories"][0] | {"score": 0, "similarity": 0} == {
        "id": memory.id, "format": "insight", "domains": ["math"], "source_task_ids": ["m1"],
        "score": 0, "similarity": 0, "retriever": found["memories"][0]["retriever"]}
    assert 0 < found["memories"][0]["similarity"] <= 1 and found["memories"][0]["retriever"] in {"dense", "both"}
    assert [(s["tool"], s["exit_code"]) for s in steps] == [("bash", 0), ("bash", 0), ("bash", 0), ("submit", None)]
    assert steps[2]["command"] == "python3 -m unittest -q test_slug"
    assert agent == {"kind": "agent", "exit_status": "submitted", "steps": 4, "tokens": agent["tokens"],
                     "malformed": 0, "error": None}
    assert verdict["status"] == "pass" and verdict["source"] == "tests" and verdict["tests_modified"] == []
    assert [w["id"] for w in written["memories"]] == out["new_memory_ids"] and written["memories"][0]["status"] \
        == "added"
    assert credited == {"kind": "credited", "ids": [memory.id], "cited": [], "outcome": "success",
                        "verdict_by": "tests", "quarantined": []}


def test_a_failing_test_run_streams_the_refresh_and_a_failed_verdict(pool, tmp_path):
    seeded(pool)
    graph = build_mtl_graph(ScriptedChatModel(responses=[AIMessage(PLAN), bash_call("python3 -m unittest -q test_slug"),
                                                         submit_call("gave up")]),
                            pool, memory_type="insight", distill_formats=["trajectory"], run_log=tmp_path / "r.jsonl")
    other = InsightMemory(title="Read the assertion error before editing",
                          description="When a unit test fails with an AssertionError on slug output.",
                          content="Read which input fails and what the test expects.",
                          sources=[Provenance(domain="data", source_task_id="d1")])
    pool.add(other)
    events, _ = custom_events(graph, str(EXAMPLES / "slugify"), context=MTLContext(re_retrieve=True, top_k=1,
                                                                                        relevance_floor=-1))
    kinds = [e["kind"] for e in events]
    assert kinds == ["plan", "retrieved", "retrieval", "step", "retrieved", "step", "agent", "verdict", "written",
                     "credited"]
    assert events[3]["exit_code"] != 0 and events[4]["refresh"] is True
    assert events[4]["memories"][0]["id"] not in {m["id"] for m in events[1]["memories"]}
    assert events[7]["status"] == "fail" and events[-1]["outcome"] == "failure"


def test_an_errored_run_streams_its_error_verdict_and_writes_nothing(pool, tmp_path):
    graph = build_mtl_graph(ScriptedChatModel(responses=[]), pool, run_log=tmp_path / "r.jsonl")
    events, out = custom_events(graph, 42)
    assert [e["kind"] for e in events] == ["verdict"]
    assert events[0]["status"] == "error" and events[0]["reason"].startswith("invalid task")
    assert out["outcome"] == "error"


def test_emit_outside_a_graph_run_is_a_no_op():
    emit("plan", query="nothing listens")  # an agent run directly, outside any graph: must not raise


def test_mtl_run_renders_the_stream(tmp_path):
    script = EXAMPLES / "slugify" / "demo_script.json"
    with MemoryPool.open(tmp_path / "pool") as pool:
        seeded(pool)
    result = CliRunner().invoke(app, ["run", str(EXAMPLES / "slugify"), "--model", f"scripted:{script}", "--memory",
                                      "trajectory", "--pool", str(tmp_path / "pool")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("plan") for line in lines)
    assert "retrieve  no memories matched" in result.output  # the only memory is an insight, not a trajectory
    assert "$ python3 -m unittest -q test_slug (exit 0)" in result.output
    assert "agent  submitted after 4 steps" in result.output and "judge  PASS (by tests)" in result.output
    assert "write back  memory" in result.output and " added" in result.output
