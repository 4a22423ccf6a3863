"""A run's cost: the model calls and input / output tokens of each stage that called a model, in the run's
output and its run log (the agent's own calls under execute, the memory method's under plan, judge, distill)."""

import json

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.bench import learning_sequences as ls
from mtl_graph.core.task import Task
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.core.cost import extra

JUDGED = {"spec_satisfied": True, "technically_correct": True, "no_regressions": True,
          "interfaces_respected": True, "verified_with_evidence": True,
          "reasoning": "The file was written and printed back.", "verdict": "pass"}


def test_each_stage_that_calls_a_model_reports_its_calls_and_tokens(pool, tmp_path):
    spec = ls.make_tasks(1, prefix="cost")[0]
    log = tmp_path / "runs.jsonl"
    graph = build_mtl_graph(ls.agent_for(spec), pool, sandbox="local", run_log=log)
    state = graph.invoke({"task": spec.task})
    cost = state["cost"]
    assert set(cost) == {"plan", "execute", "distill"}  # the check judged it: no judge call
    assert cost["plan"]["calls"] == 1 and cost["distill"]["calls"] == 1
    assert cost["execute"]["calls"] == sum(1 for s in state["trajectory"]["steps"])
    assert all(c["input_tokens"] > 0 and c["output_tokens"] > 0 for c in cost.values())
    assert cost["execute"]["input_tokens"] == state["trajectory"]["tokens"]["input"]  # what the agent counted
    tools = [s["tool"] for s in state["trajectory"]["steps"]]
    assert cost["execute"]["tool_calls"] == {t: tools.count(t) for t in tools}  # bash, submit
    assert extra(cost) == {"calls": 2, "input_tokens": cost["plan"]["input_tokens"] + cost["distill"]["input_tokens"],
                           "output_tokens": cost["plan"]["output_tokens"] + cost["distill"]["output_tokens"],
                           "memory_tool_calls": 0}
    [record] = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["cost"] == cost

    again = graph.invoke({"task": spec.task})  # a second run starts its own count
    assert again["cost"]["plan"]["calls"] == 1


def test_the_llm_judge_is_counted_and_a_model_without_usage_counts_calls_only(pool, tmp_path):
    task = Task(id="echo", domain="shell", instruction="Write hi into hello.txt.")  # no check: the LLM judges
    model = ScriptedChatModel(responses=[bash_call("echo hi > hello.txt"), submit_call("done")],
                              answers={"judge": JUDGED}, plan="I will write the file and print it back.")
    state = build_mtl_graph(model, pool, sandbox="local", online=False, run_log=tmp_path / "r.jsonl").invoke(
        {"task": task})
    assert state["verdict"]["status"] == "pass"
    assert state["cost"]["judge"] == {"calls": 1, "input_tokens": 0, "output_tokens": 0}
    assert "distill" not in state["cost"]  # offline: nothing distilled, nothing spent
    assert extra(state["cost"]) == {"calls": 2, "input_tokens": 0, "output_tokens": 0,  # plan + judge
                                    "memory_tool_calls": 0}


def test_memory_tool_calls_count_as_the_methods_own_wherever_they_happen():
    cost = {"execute": {"calls": 4, "input_tokens": 900, "output_tokens": 90,
                        "tool_calls": {"bash": 2, "search_memories": 2}},
            "plan": {"calls": 1, "input_tokens": 100, "output_tokens": 40}}
    assert extra(cost) == {"calls": 1, "input_tokens": 100, "output_tokens": 40, "memory_tool_calls": 2}
    assert extra({}) == {"calls": 0, "input_tokens": 0, "output_tokens": 0, "memory_tool_calls": 0}
