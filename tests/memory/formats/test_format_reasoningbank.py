"""The ReasoningBank format (a baseline): up to three items per run from its own success and failure prompts,
keyed by the source task, retrieved with the new task behind an instruction prefix (no plan)."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from mtl_graph.llm.scripted import ScriptedChatModel
from mtl_graph.core.task import TaskRef
from mtl_graph.core.trajectory import Step, Trajectory, Verdict, VerdictStatus
from mtl_graph.distill.distillers import DISTILLERS, distill
from mtl_graph.memory import formats
from mtl_graph.memory.formats.reasoningbank import ReasoningBankMemory
from mtl_graph.memory.base import Outcome, parse_memory

TASK = "The function total() in mod_total.py adds where it should subtract. Fix it so the check passes."
ITEM = {"title": "Rerun the check after the last edit",
        "description": "A fix can hide a second problem that only the check reveals.",
        "content": "Run the check command after your final edit and read its output before submitting."}
ITEM2 = {"title": "Read the module before editing",
         "description": "Other code in the module may depend on the function you change.",
         "content": "Open the module under test and read it fully before the first edit."}


def run_of(status: VerdictStatus = VerdictStatus.PASS, instruction: str = TASK) -> Trajectory:
    return Trajectory(task=TaskRef(id="rb-1", domain="python", instruction=instruction),
                      steps=[Step(action="sed -i 's/+/-/' mod_total.py", observation="", exit_code=0),
                             Step(action="python3 check.py", observation="ok", exit_code=0)],
                      verdict=Verdict(status=status, reason="the check", source="tests"), model="task-model")


def scripted(answer: dict) -> ScriptedChatModel:
    return ScriptedChatModel(answers={"ReasoningBankDraft": answer})


def test_a_run_yields_up_to_three_items_keyed_by_its_task_and_shown_in_the_prompt(pool):
    result = distill(run_of(), ["reasoningbank"], scripted({"items": [ITEM, ITEM2]}), distill_model="scripted")
    assert not result.failures, result.failures
    [memory] = result.memories
    assert isinstance(memory, ReasoningBankMemory) and [i.title for i in memory.items] == [ITEM["title"],
                                                                                             ITEM2["title"]]
    assert memory.query == TASK == memory.key_text() and memory.outcome == Outcome.SUCCESS
    assert parse_memory(memory.model_dump_json()) == memory
    assert "1. Rerun the check after the last edit: A fix can hide" in memory.body()
    pool.add(memory)
    query = formats.query_for("reasoningbank", "The function gap() in mod_gap.py multiplies. Fix it.")
    assert query.startswith("Instruct: ") and query.endswith("Query: The function gap() in mod_gap.py multiplies. "
                                                             "Fix it.")
    [hit] = pool.search(query, type="reasoningbank", k=3)
    assert hit.memory == memory
    assert formats.get("reasoningbank").uses_plan is False and not formats.uses_plan("reasoningbank")


def test_success_and_failure_runs_get_their_own_prompt():
    distiller = DISTILLERS["reasoningbank"]
    asked = {}
    for status in (VerdictStatus.PASS, VerdictStatus.FAIL):
        messages = distiller.messages(run_of(status), run_of(status).verdict.outcome, _config())
        asked[status] = next(m.content for m in messages if isinstance(m, HumanMessage))
    assert "judged a success" in asked[VerdictStatus.PASS] and "FAILURE" in asked[VerdictStatus.FAIL]
    assert "why this run failed" in asked[VerdictStatus.FAIL] and "why this run succeeded" in asked[VerdictStatus.PASS]
    failed = distill(run_of(VerdictStatus.FAIL), ["reasoningbank"], scripted({"items": [ITEM]}))
    assert failed.memories[0].outcome == Outcome.FAILURE


def _config():
    from mtl_graph.distill.distillers import DistillConfig

    return DistillConfig()


@pytest.mark.parametrize("answer, says", [
    ({"items": [ITEM] * 4}, "at most 3"),
    ({"items": []}, "at least 1"),
    ({"items": [{**ITEM, "content": "Edit mod_total.py and rerun check.py afterwards, then submit it."}]},
     "leaks task specifics"),
])
def test_a_bad_answer_is_reported_with_its_reason_and_no_memory(answer, says):
    result = distill(run_of(), ["reasoningbank"], scripted(answer))
    assert result.memories == [] and [f.format for f in result.failures] == ["reasoningbank"]
    assert says in result.failures[0].reason and "\n" not in result.failures[0].reason
