"""The MTL graph end to end: scripted model (real tool calls), real sandbox, real pool, real embeddings."""

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from mtl_graph.agent import AgentConfig, DefaultAgent

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, load_action_script, submit_call, text_action
from mtl_graph.pipeline import MTLContext, build_mtl_graph
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task
from helpers.paths import EXAMPLES


class RecordingModel(ScriptedChatModel):
    """A scripted model that also keeps every prompt it was sent."""

    prompts: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.prompts.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


def scripted(name: str, plan: str | None = None, extra=()) -> RecordingModel:
    actions = load_action_script(EXAMPLES / name / "demo_script.json")
    head = [AIMessage(plan)] if plan else []
    return RecordingModel(responses=[*head, *actions, *extra], prompts=[])


def run(graph, task, **context):
    return graph.invoke({"task": task}, context=MTLContext(**context) if context else None)


def test_success_path_writes_a_memory_that_a_task_in_another_domain_retrieves(pool, tmp_path):
    log = tmp_path / "runs.jsonl"
    first = build_mtl_graph(scripted("slugify"), pool, memory_type="trajectory", hold_one_out=True,
                            distill_formats=["trajectory"], run_log=log)
    state = run(first, str(EXAMPLES / "slugify"))
    assert state["error"] is None
    assert state["verdict"]["status"] == "pass" and state["verdict"]["source"] == "tests"
    assert state["retrieved"] == [] and len(state["new_memory_ids"]) == 1
    memory = pool.get(state["new_memory_ids"][0])
    assert memory.type == "trajectory" and memory.outcome == "success" and memory.domains == ["strings"]
    assert any("python3 -m unittest" in s.command for s in memory.steps)

    model = scripted("primes")
    second = build_mtl_graph(model, pool, memory_type="trajectory", hold_one_out=True,
                             distill_formats=["trajectory"], run_log=log)
    state = run(second, str(EXAMPLES / "primes"))
    assert state["verdict"]["status"] == "pass"
    assert [r["id"] for r in state["retrieved"]] == [memory.id]
    assert state["retrieved"][0]["domains"] == ["strings"] and state["retrieved"][0]["similarity"] > 0
    system = model.prompts[0][0].content
    last = system.rstrip().splitlines()  # the memory ends the prompt, fenced and quoted (see test_render.py)
    assert system.count("Memories from past runs") == 1 and last[-1].startswith("</memory-")
    assert last[-2] == "│ " + memory.render(1).splitlines()[-1].strip()
    credited = pool.get(memory.id).stats
    assert (credited.retrieved, credited.retrieved_success) == (1, 1)

    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["task"]["id"] for r in records] == ["examples/slugify", "examples/primes"]
    assert records[1]["retrieved"][0]["id"] == memory.id and records[1]["verdict"]["status"] == "pass"
    assert set(records[1]["timings"]) == {"plan", "retrieve", "execute", "judge", "distill"}


INSIGHT = {"title": "Re-run the tests after the last edit",
           "description": "When a fix is submitted without running the tests after the final change.",
           "content": "Always run the test suite after your final edit and read its result before submitting."}


def test_failure_path_uses_failure_prompts_and_insight_distillation(pool, tmp_path):
    task = Task(id="fail-1", domain="strings", instruction="Make `f()` in f.py return 2.",
                files={"f.py": "def f():\n    return 1\n"}, check="python3 -c 'from f import f; assert f() == 2'")
    model = RecordingModel(prompts=[], responses=[
        AIMessage("Plan: read f.py, change the return value, run a quick check, submit."),
        bash_call("sed -i 's/return 1/return 3/' f.py"),
        submit_call("changed f"),
        AIMessage("", tool_calls=[{"name": "InsightDraft", "args": INSIGHT, "id": "d1"}]),
    ])
    graph = build_mtl_graph(model, pool, memory_type="insight", run_log=tmp_path / "log.jsonl")
    state = run(graph, task)
    assert state["verdict"]["status"] == "fail"
    distill_prompt = "\n".join(str(m.content) for m in model.prompts[-1])
    assert "fail" in distill_prompt.lower() and "anti-pattern" in distill_prompt.lower()
    [memory_id] = state["new_memory_ids"]
    stored = pool.get(memory_id)
    assert stored.outcome == "failure" and stored.title == INSIGHT["title"]


def seed(pool):
    memories = [
        InsightMemory(title="Run the unit tests", description="Verify every change with the tests.",
                      content="Run them.", sources=[Provenance(domain="strings", source_task_id="s1")]),
        InsightMemory(title="Test before submitting", description="Check the test suite passes before submit.",
                      content="Run the suite.", sources=[Provenance(domain="math", source_task_id="m1")]),
        InsightMemory(title="Read tests to learn the interface", description="Tests show the expected API.",
                      content="Read them first.", sources=[Provenance(domain="data", source_task_id="task-x")]),
    ]
    pool.add_many(memories)
    return memories


def test_hold_one_out_and_same_task_guard(pool, tmp_path):
    memories = seed(pool)
    task = Task(id="task-x", domain="strings", instruction="Run the unit tests of the project and fix failures.",
                check="true")
    model = ScriptedChatModel(plan="I will run the tests and verify.")  # the same plan for each of the three runs
    graph = build_mtl_graph(model, pool, top_k=5, online=False, run_log=tmp_path / "l.jsonl")
    state = run(graph, task, hold_one_out=True)
    retrieved = state["retrieved"]
    assert [r["domains"] for r in retrieved] == [["math"]]  # strings held out, task-x is the same task
    assert all("task-x" not in r["source_task_ids"] for r in retrieved)
    state = run(graph, task, exclude_domains=["math"])
    assert {tuple(r["domains"]) for r in state["retrieved"]} == {("strings",)}
    state = run(graph, task, exclude_task_ids=["s1"], only_ids=[m.id for m in memories[:2]])
    assert [r["source_task_ids"] for r in state["retrieved"]] == [["m1"]]
    assert state["new_memory_ids"] == []  # offline mode writes nothing


def test_text_action_agent_and_streaming_updates(pool, tmp_path):
    task = Task(id="t-text", domain="shell", instruction="Create hello.txt containing hi.",
                check="grep -qx hi hello.txt")
    model = ScriptedChatModel(responses=[text_action("bash", "echo hi > hello.txt"),
                                         text_action("submit", "created hello.txt")])
    graph = build_mtl_graph(model, pool, memory_type="none", online=False,
                            agent=DefaultAgent(AgentConfig(action_format="text")), run_log=tmp_path / "l.jsonl")
    updates = [chunk for chunk in graph.stream({"task": task}, stream_mode="updates")]
    assert [next(iter(u)) for u in updates] == ["plan", "retrieve", "execute", "judge", "distill", "write_back"]
    judged = updates[3]["judge"]
    assert judged["verdict"]["status"] == "pass"
    assert judged["trajectory"]["steps"][0]["action"] == "echo hi > hello.txt"


def test_step_limit_is_recorded_and_judged_by_tests(pool, tmp_path):
    task = Task(id="t-loop", domain="shell", instruction="Do nothing useful.", check="test -f done")
    model = ScriptedChatModel(responses=[bash_call(f"echo {i}") for i in range(10)])
    graph = build_mtl_graph(model, pool, memory_type="none", online=False,
                            agent=DefaultAgent(AgentConfig(step_limit=3)), run_log=tmp_path / "l.jsonl")
    state = run(graph, task)
    assert state["trajectory"]["exit_status"] == "step_limit" and len(state["trajectory"]["steps"]) == 3
    assert state["verdict"]["status"] == "fail"


def test_bad_inputs_give_clear_errors_and_still_log(pool, tmp_path):
    log = tmp_path / "l.jsonl"
    graph = build_mtl_graph(None, pool, memory_type="none", run_log=log)
    state = run(graph, Task(id="t", instruction="x"))
    assert "no chat model configured" in state["error"] and "mtl demo" in state["error"]

    (tmp_path / "empty-task").mkdir()
    state = run(graph, str(tmp_path / "empty-task"))
    assert "no task.md" in state["error"]

    bad_setup = Task(id="t-setup", instruction="x", setup="exit 7")
    state = run(build_mtl_graph(ScriptedChatModel(responses=[]), pool, run_log=log, memory_type="none"), bad_setup)
    assert "setup failed (exit 7)" in state["error"]

    class Exploding(ScriptedChatModel):
        def _generate(self, *a, **k):
            raise RuntimeError("provider is down")

    state = run(build_mtl_graph(Exploding(responses=[]), pool, run_log=log, memory_type="none"),
                Task(id="t-err", instruction="x", check="true"))
    assert state["trajectory"]["exit_status"] == "model_error"

    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 4 and lines[0]["error"] and lines[2]["error"].startswith("task setup failed")

    with pytest.raises(ValueError):
        build_mtl_graph(None, pool, memory_type="poem")


def test_unreachable_pool_is_reported_and_logged(tmp_path, embeddings):
    log = tmp_path / "l.jsonl"
    graph = build_mtl_graph(ScriptedChatModel(responses=[AIMessage("plan")]), None, run_log=log)
    import os

    os.environ["MTL_POOL"] = "http://127.0.0.1:9"
    try:
        state = run(graph, Task(id="t", instruction="do it", check="true"))
    finally:
        del os.environ["MTL_POOL"]
    assert "cannot reach the Qdrant server" in state["error"]
    assert "cannot reach" in json.loads(log.read_text())["error"]


def test_with_memory_transfer_wraps_create_agent_and_reports_its_failures(pool, tmp_path):
    from langchain.agents import create_agent
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import tool

    from mtl_graph.pipeline import with_memory_transfer

    seen = {}

    @tool
    def write(path: str, text: str, config: RunnableConfig) -> str:
        """Write a file in the workspace."""
        seen["workspace"] = config["configurable"]["mtl_workspace"]
        (Path(seen["workspace"]) / path).write_text(text)
        return "written"

    seed(pool)
    task = Task(id="wrapped", domain="shell", instruction="Write ok.txt containing yes.", check="grep -qx yes ok.txt")
    model = RecordingModel(prompts=[], responses=[
        AIMessage("I will write the file and check it."),
        AIMessage("", tool_calls=[{"name": "write", "args": {"path": "ok.txt", "text": "yes\n"}, "id": "w1"}]),
        AIMessage("Done: ok.txt contains yes."),
    ])
    graph = with_memory_transfer(create_agent(model, tools=[write]), pool, model=model, online=False,
                                 run_log=tmp_path / "l.jsonl")
    state = run(graph, task)
    assert state["verdict"] == {"status": "pass", "source": "tests", "reason": state["verdict"]["reason"],
                                "tests_modified": [], "dropped": [], "suspicions": []}
    assert state["trajectory"]["steps"][0]["tool"] == "write" and state["trajectory"]["submission"]
    agent_prompt = model.prompts[1]
    assert agent_prompt[0].type == "system" and "Memories from past runs" in agent_prompt[0].content
    assert seen["workspace"] in agent_prompt[1].content and len(state["retrieved"]) == 3

    class Broken(RecordingModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            if any("working directory" in str(m.content) for m in messages):
                raise RuntimeError("rate limited")
            return super()._generate(messages, stop, run_manager, **kwargs)

    broken = Broken(prompts=[], responses=[AIMessage("plan")])
    state = run(with_memory_transfer(create_agent(broken, tools=[write]), pool, model=broken,
                                     run_log=tmp_path / "l.jsonl"), task)
    assert state["error"].startswith("wrapped agent failed: RuntimeError: rate limited")
    assert len((tmp_path / "l.jsonl").read_text().splitlines()) == 2


def test_a_failing_test_run_re_retrieves_once_with_the_error(pool, tmp_path):
    csv = InsightMemory(title="Round money sums", description="Float sums of prices fail exact equality tests.",
                        content="Round each total to two decimals before comparing.",
                        sources=[Provenance(domain="finance", source_task_id="f1")])
    seed(pool)
    pool.add(csv)
    task = Task(id="t-refresh", domain="strings", instruction="Make the unit tests in test_sum.py pass.",
                files={"test_sum.py": "import unittest\nclass T(unittest.TestCase):\n"
                                      "    def test(self):\n        self.assertEqual(0.1 + 0.2, 0.3)\n"},
                check="python3 -m unittest -q test_sum")
    model = RecordingModel(prompts=[], responses=[
        AIMessage("I will run the tests and fix what fails."),
        bash_call("python3 -m unittest -q test_sum"),
        bash_call("python3 -m unittest -q test_sum"),
        submit_call("gave up"),
    ])
    graph = build_mtl_graph(model, pool, top_k=1, online=False, run_log=tmp_path / "l.jsonl")
    state = run(graph, task, re_retrieve=True)
    first = state["retrieved"][0]["id"]
    [again] = state["re_retrieved"]
    assert again["id"] == csv.id != first
    observations = [m.content for m in model.prompts[-1] if m.type == "tool"]
    assert "More memories, retrieved because that test run failed" in observations[0]
    assert "Memory 2 (insight, " in observations[0] and "│ Round money sums" in observations[0]
    assert "More memories" not in observations[1]  # only once
    assert json.loads((tmp_path / "l.jsonl").read_text())["re_retrieved"][0]["id"] == csv.id
    off = run(build_mtl_graph(RecordingModel(prompts=[], responses=list(model.responses)), pool, top_k=1,
                              online=False, run_log=tmp_path / "l.jsonl"), task)
    assert not off["re_retrieved"]


def test_judge_also_keeps_the_llm_verdict_beside_the_tests(pool, tmp_path):
    task = Task(id="t-judge", domain="shell", instruction="Create done.txt.", check="test -f done.txt")
    decision = {"spec_satisfied": True, "technically_correct": True, "no_regressions": True,
                "interfaces_respected": True, "verified_with_evidence": False,
                "reasoning": "The file was created but never checked.", "verdict": "fail"}
    model = RecordingModel(prompts=[], responses=[
        bash_call("touch done.txt"), submit_call("created"),
        AIMessage("", tool_calls=[{"name": "JudgeDecision", "args": decision, "id": "j1"}]),
    ])
    graph = build_mtl_graph(model, pool, memory_type="none", online=False, run_log=tmp_path / "l.jsonl")
    state = run(graph, task, judge_also=True)
    assert state["verdict"]["status"] == "pass" and state["verdict"]["source"] == "tests"
    assert state["judge_verdict"]["status"] == "fail" and state["judge_verdict"]["source"] == "judge"
    judge_prompt = "\n".join(str(m.content) for m in model.prompts[-1])
    assert "touch done.txt" in judge_prompt and "check exit code" not in judge_prompt  # blind to the tests


@pytest.mark.parametrize("reply, expected", [
    (AIMessage("x" * 10_000), "x" * 2000),  # huge plans are cut before they become a query
    (AIMessage("   "), "Make it work."),  # empty plans fall back to the task text
    (RuntimeError("provider down"), "Make it work."),  # so do planning failures
])
def test_untrusted_plans_become_safe_queries(pool, tmp_path, reply, expected):
    class Planner(ScriptedChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            if isinstance(reply, Exception):
                raise reply
            return super()._generate(messages, stop, run_manager, **kwargs)

    graph = build_mtl_graph(Planner(responses=[reply] if isinstance(reply, AIMessage) else []), pool,
                            online=False, run_log=tmp_path / "l.jsonl")
    updates = list(graph.stream({"task": Task(id="p", instruction="Make it work.")}, stream_mode="updates"))
    assert updates[0]["plan"]["query"] == expected


def test_state_survives_a_checkpointer(pool, tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_mtl_graph(scripted("slugify"), pool, memory_type="trajectory", distill_formats=["trajectory"],
                            checkpointer=InMemorySaver(), run_log=tmp_path / "l.jsonl")
    config = {"configurable": {"thread_id": "t1"}}
    state = graph.invoke({"task": str(EXAMPLES / "slugify")}, config=config, context=MTLContext())
    saved = graph.get_state(config).values
    assert saved["verdict"] == state["verdict"] and saved["task"]["id"] == "examples/slugify"
    assert [m.type for m in saved["messages"]][:2] == ["system", "human"]
