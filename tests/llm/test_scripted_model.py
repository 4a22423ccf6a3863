"""The scripted model answers by the request's shape: real LangChain agents, structured output, the MTL graph
under every memory format, and the README's `mtl run` line with the shipped demo scripts."""

from __future__ import annotations

import json

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel
from typer.testing import CliRunner

from mtl_graph import ScriptedChatModel, bash_call, submit_call
from mtl_graph.agent import TOOLS
from mtl_graph.cli import app
from mtl_graph.core.task import Task
from mtl_graph.distill.distillers import InsightDraft
from mtl_graph.pipeline import build_mtl_graph
from helpers.paths import ROOT

PRIMES = ROOT / "examples" / "tasks" / "primes"
INSIGHT = {"title": "Run the tests before submitting", "description": "When a task ships its own unit tests.",
           "content": "Run the unit tests after each edit and submit only once they pass."}


class Point(BaseModel):
    x: int
    y: int


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def add_call(a: int, b: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": a, "b": b}, "id": "c1", "type": "tool_call"}])


def test_create_agent_runs_a_real_tool_and_ends():
    model = ScriptedChatModel(responses=[add_call(2, 3), AIMessage(content="2 + 3 = 5")])
    messages = create_agent(model, tools=[add]).invoke({"messages": [HumanMessage("add 2 and 3")]})["messages"]
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert messages[2].content == "5" and messages[3].content == "2 + 3 = 5" and model.exhausted


def test_a_binding_shares_the_position_but_not_its_tools():
    model = ScriptedChatModel(responses=[bash_call("ls")])
    bound = model.bind_tools(TOOLS)
    assert bound is not model and bound.invoke("go").tool_calls[0]["args"] == {"command": "ls"} and model.i == 1
    assert bound.invoke("go").tool_calls[0]["name"] == "submit"  # ran out, with a submit tool bound
    plain = model.invoke("go")  # the agent's tools are not seen by a later call without them
    assert not plain.tool_calls and "```submit" in plain.content and model.bound_tools == []


def test_structured_output_is_answered_from_answers_without_a_reply():
    model = ScriptedChatModel(responses=[bash_call("ls")], answers={"Point": {"x": 1, "y": 2}, "insight": INSIGHT})
    assert model.with_structured_output(Point).invoke("where?") == Point(x=1, y=2)
    out = model.with_structured_output(InsightDraft, include_raw=True).invoke("what did you learn?")
    assert out["parsed"] == InsightDraft(**INSIGHT) and out["raw"].tool_calls[0]["name"] == "InsightDraft"
    assert model.i == 0 and model.with_structured_output(Point).invoke("again") == Point(x=1, y=2)


def test_an_unanswered_structured_request_takes_the_next_reply():
    answer = AIMessage(content="", tool_calls=[{"name": "Point", "args": {"x": 5, "y": 6}, "id": "p", "type": "tool_call"}])
    model = ScriptedChatModel(responses=[answer], answers={"insight": INSIGHT})
    assert model.with_structured_output(Point).invoke("where?") == Point(x=5, y=6) and model.exhausted
    # An answered tool bound among others, unforced, is an agent's turn, not a structured request.
    assert model.bind_tools([InsightDraft, add]).invoke("go").content.startswith("```submit")


def test_plan_answers_every_plan_request_and_only_those():
    model = ScriptedChatModel(responses=[bash_call("ls")], plan="Look around, then list the files.")
    assert [model.invoke([HumanMessage("plan it")]).content for _ in range(2)] == ["Look around, then list the files."] * 2
    assert model.i == 0
    # A text-mode agent's turn has no tools either, but it opens with a system prompt: it takes the reply.
    assert model.invoke([SystemMessage("you are an agent"), HumanMessage("task")]).tool_calls and model.exhausted
    unplanned = ScriptedChatModel(responses=[AIMessage(content="my plan"), bash_call("ls")])
    assert unplanned.invoke([HumanMessage("plan it")]).content == "my plan" and unplanned.i == 1


def _run(model: ScriptedChatModel, pool, memory_type: str) -> dict:
    graph = build_mtl_graph(model, pool, memory_type=memory_type)
    return graph.invoke({"task": Task.from_dir(PRIMES)}, context={"relevance_floor": -1})


@pytest.mark.parametrize("memory_type", ["insight", "trajectory", "none"])
def test_one_script_drives_the_graph_under_every_memory_format(pool, memory_type):
    model = ScriptedChatModel.from_script(PRIMES / "demo_script.json")
    state = _run(model, pool, memory_type)
    assert state["error"] is None and state["verdict"]["status"] == "pass"
    steps = state["trajectory"]["steps"]
    assert [s["tool"] for s in steps] == ["bash", "bash", "bash", "submit"] and "cat primes.py" in steps[0]["action"]
    assert model.i == len(model.responses)  # every agent reply used once: neither the plan nor distilling took one
    if memory_type == "insight":
        assert state["query"] == model.plan and state["distill_failures"] == []
        assert pool.count(type="insight") == len(state["new_memory_ids"]) == 1


@pytest.mark.parametrize("name", ["primes", "slugify", "csv-totals"])
def test_each_demo_script_answers_the_judge_and_writes_every_model_format(pool, name):
    task_dir = PRIMES.parent / name
    model = ScriptedChatModel.from_script(task_dir / "demo_script.json")
    graph = build_mtl_graph(model, pool, distill_formats=["insight", "workflow", "summary"])
    state = graph.invoke({"task": Task.from_dir(task_dir)}, context={"judge_also": True})
    assert state["verdict"]["status"] == state["judge_verdict"]["status"] == "pass"
    assert state["distill_failures"] == [] and len(state["new_memory_ids"]) == 3  # no leak, no quality-gate refusal


def test_an_inline_script_with_plan_and_answers_writes_an_insight(pool):
    script = [bash_call("cat primes.py test_primes.py"), submit_call("looked only")]
    model = ScriptedChatModel(responses=script, plan="Read the module and its tests, then write a sieve.",
                              answers={"insight": INSIGHT})
    state = _run(model, pool, "insight")
    assert state["error"] is None and state["new_memory_ids"] and pool.count(type="insight") == 1


def test_a_scripted_model_named_in_the_run_context_writes_an_insight(pool):
    # What Studio sends: a model string in the context, loaded with the file's plan and answers.
    state = build_mtl_graph(None, pool).invoke({"task": Task.from_dir(PRIMES)}, context={
        "model": f"scripted:{PRIMES / 'demo_script.json'}", "relevance_floor": -1})
    assert state["error"] is None and state["distill_failures"] == [] and pool.count(type="insight") == 1


def test_the_readme_run_line_writes_an_insight_memory(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MTL_POOL", str(tmp_path / "pool"))
    monkeypatch.setenv("MTL_RUN_LOG", str(tmp_path / "runs.jsonl"))
    result = CliRunner().invoke(app, ["run", "examples/tasks/primes", "--model",
                                      "scripted:examples/tasks/primes/demo_script.json", "--json"])
    assert result.exit_code == 0, result.output
    state = json.loads(result.output)
    assert state["verdict"]["status"] == "pass" and len(state["new_memory_ids"]) == 1
    assert state["distill_failures"] == []
    listed = CliRunner().invoke(app, ["memories", "list", "--json", "--pool", str(tmp_path / "pool")])
    assert [m["type"] for m in json.loads(listed.output)] == ["insight"]


@pytest.mark.parametrize("extra, problem", [
    ({"plan": 42}, "plan: Input should be a valid string"),
    ({"plan": ""}, "plan: String should have at least 1 character"),
    ({"answers": ["secret-value-1"]}, "answers: Input should be a valid dictionary"),
    ({"answers": {"secret-key-2": "secret-value-2"}}, "answers.<key>: Input should be a valid dictionary"),
    ({"answers": {"insight": {**INSIGHT, "secret-key-3": 1}}},
     "answers.insight: unknown field; the fields are title, description, content"),
    ({"answers": {"InsightDraft": {**INSIGHT, "title": "x"}}},
     "answers.InsightDraft.title: String should have at least 3 characters"),
    ({"answers": {"judge": {"verdict": "pass"}}}, "answers.judge.spec_satisfied: Field required"),
    ({"answers": {"trajectory": {}}}, "answers.trajectory: trajectory memories are copied from the run"),
])
def test_a_bad_script_gives_one_line_naming_the_file_and_the_key(tmp_path, extra, problem):
    path = tmp_path / "bad-script.json"
    path.write_text(json.dumps({"actions": [{"submit": "done"}], **extra}))
    with pytest.raises(ValueError) as caught:
        ScriptedChatModel.from_script(path)
    message = str(caught.value)
    assert message.startswith(f"invalid action script {path}: {problem}") and "\n" not in message
    assert "secret" not in message  # the file's own keys and values are never echoed


def test_answers_for_a_callers_own_schema_are_passed_on_as_written(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"actions": [{"submit": "done"}], "answers": {"Point": {"x": 3, "y": 4, "z": 0}}}))
    model = ScriptedChatModel.from_script(path, action_format="text")
    assert model.with_structured_output(Point).invoke("where?") == Point(x=3, y=4)
    assert model.responses[0].content == "```submit\ndone\n```" and model.plan is None


def test_the_scripted_model_imports_no_schema_and_checks_an_answer_when_its_schema_is_bound():
    """llm is below the distillers and the judge: a fresh process loading a script with a bad insight answer
    imports neither, and the answer fails when a request binds the draft (declared schemas fail on load)."""
    import subprocess
    import sys

    code = f"""
import sys
from mtl_graph.llm.scripted import ScriptedChatModel
model = ScriptedChatModel(answers={{"insight": {{**{INSIGHT!r}, "title": "x"}}}})
assert not {{"mtl_graph.distill.distillers", "mtl_graph.judging.judges"}} & set(sys.modules)
from mtl_graph.memory.formats.insight import InsightDraft
try:
    model.with_structured_output(InsightDraft).invoke("what did you learn?")
except ValueError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "answers.insight.title: String should have at least 3 characters", out.stderr
