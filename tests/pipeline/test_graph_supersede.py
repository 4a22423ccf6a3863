"""Supersession through the real graph: a run shown a memory that distils the contradicting advice adds it (it is
what the run learnt, not a copy), the older is superseded, and the next run is served the newer."""

import json

from langchain_core.messages import AIMessage

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.pipeline import build_mtl_graph
from helpers.memory_fixtures import broken_add_task

TASK = broken_add_task("sup-fix")
OLD = InsightMemory(title="Run the check with --timeout 30",
                    description="When the check command hangs, run it with --timeout 30.",
                    content="Run the check with --timeout 30 after the last edit.", outcome="success",
                    sources=[Provenance(domain="strings", source_task_id="s1")])
FIX = [bash_call("sed -i 's/a - b/a + b/' calc.py", thought="Using Memory 1."), bash_call("python3 check.py"),
       submit_call("fixed add")]


def distilled(title, description, content):
    return AIMessage(json.dumps({"title": title, "description": description, "content": content}))


def run(pool, memory_reply, log=None, task=TASK):
    model = ScriptedChatModel(responses=[AIMessage("Plan: fix add and rerun the check."), *FIX, memory_reply])
    return build_mtl_graph(model, pool, top_k=1, relevance_floor=-1, run_log=log).invoke({"task": task})


def test_contradicting_advice_distilled_by_a_run_supersedes_the_memory_it_was_shown(pool, tmp_path):
    pool.add(OLD)
    log = tmp_path / "runs.jsonl"
    state = run(pool, distilled("Run the check with --timeout 300",
                                "When the check command hangs, run it with --timeout 300.",
                                "Run the check with --timeout 300 after the last edit."), log)
    assert state["verdict"]["status"] == "pass" and state["credit"]["re_extracted"] == {}
    [new_id] = state["new_memory_ids"]
    old = pool.get(OLD.id)
    assert old.superseded_by == new_id and pool.get(new_id).supersedes == [OLD.id] and pool.count() == 2
    other_task = TASK.model_copy(update={"id": "sup-fix-2"})  # the same task's memories are never retrieved for it
    second = run(pool, distilled("Fix the operator", "A sum written as a minus.", "Replace - with + in add."), log,
                 other_task)
    assert [r["id"] for r in second["retrieved"]] == [new_id]
    trace = json.loads(log.read_text().splitlines()[-1])["retrieval"]
    assert trace["supersedes"] == {new_id: [OLD.id]} and OLD.id not in {c["id"] for c in trace["candidates"]}


def test_a_copy_that_agrees_is_still_a_copy(pool):
    pool.add(OLD)
    state = run(pool, distilled("Run the check with --timeout 30!",
                                "When the check command hangs, run it with --timeout=30.",
                                "Run the check with --timeout 30 after the last edit."))
    assert state["new_memory_ids"] == [] and list(state["credit"]["re_extracted"].values()) == [OLD.id]
    assert pool.get(OLD.id).status == "active"
