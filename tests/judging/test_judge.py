"""The strict LLM judge, the structured-output helper, and deterministic trimming, driven by scripted models."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, Field

from mtl_graph.importers import load_file
from mtl_graph.judging.judges import Judge, JudgeConfig, LabelJudge, LLMJudge
from mtl_graph.core.rendering import render_trajectory
from mtl_graph.judging.judges import fill
from mtl_graph.llm.chat import model_label
from mtl_graph.llm.structured import StructuredCallError, extract_json_object, structured_call
from helpers.fake_models import RoutedChatModel, RoutedTextModel
from mtl_graph.core.trajectory import Step, Trajectory, Verdict, VerdictStatus
from mtl_graph.core.task import TaskRef
from helpers.paths import LOGS

ALL_OK = dict(spec_satisfied=True, technically_correct=True, no_regressions=True, interfaces_respected=True,
              verified_with_evidence=True)


def decision(verdict: str = "pass", **overrides: object) -> dict:
    return {**ALL_OK, "reasoning": "The tests ran and passed after the edit.", "verdict": verdict, **overrides}


@pytest.fixture
def run() -> Trajectory:
    return load_file(LOGS / "swe_agent" / "django__django-11099.traj")[0]


def test_pass_through_tool_calls(run: Trajectory) -> None:
    model = RoutedChatModel(script=[AIMessage("", tool_calls=[{"name": "JudgeDecision", "args": decision(), "id": "1"}],
                                                usage_metadata={"input_tokens": 900, "output_tokens": 60, "total_tokens": 960})])
    verdict, usage = LLMJudge(model).judge_with_usage(run)
    assert verdict == Verdict(status=VerdictStatus.PASS, reason="The tests ran and passed after the edit.", source="judge")
    assert usage.input == 900 and usage.output == 60
    prompt = model.calls[0][-1].content
    assert "UsernameValidator" in prompt and "verified_with_evidence" in prompt
    assert isinstance(LLMJudge(model), Judge) and isinstance(LabelJudge(), Judge)


def test_pass_with_a_failed_criterion_becomes_fail(run: Trajectory) -> None:
    model = RoutedChatModel(script=[decision("pass", verified_with_evidence=False)])
    verdict = LLMJudge(model).judge(run)
    assert verdict.status == VerdictStatus.FAIL
    assert "pass overruled" in verdict.reason and "verified_with_evidence" in verdict.reason


def test_json_mode_for_models_without_tools(run: Trajectory) -> None:
    import json

    model = RoutedTextModel(script=["Here is my verdict:\n```json\n" + json.dumps(decision("fail", spec_satisfied=False)) + "\n```"])
    verdict = LLMJudge(model).judge(run)
    assert verdict.status == VerdictStatus.FAIL and "spec_satisfied" in verdict.reason
    assert "JSON Schema" in model.calls[0][-1].content


@pytest.mark.parametrize(
    "bad",
    [
        "{ not json",                                   # malformed JSON
        "",                                             # empty answer
        "I'm sorry, but I can't help with evaluating this.",  # refusal
        {"verdict": "pass"},                            # missing fields
        decision(reasoning="x" * 5000),                 # over-long field
        decision(verdict="probably"),                   # not one of the allowed values
    ],
    ids=["malformed", "empty", "refusal", "missing", "overlong", "bad-enum"],
)
def test_bad_answer_then_retry_succeeds(run: Trajectory, bad: object) -> None:
    model = RoutedChatModel(script=[bad, decision("fail", no_regressions=False)])
    verdict = LLMJudge(model).judge(run)
    assert verdict.status == VerdictStatus.FAIL
    assert len(model.calls) == 2
    feedback = model.calls[1][-1]
    assert isinstance(feedback, (HumanMessage, ToolMessage)) and "could not be used" in feedback.content


def test_overlong_feedback_names_field_and_length(run: Trajectory) -> None:
    model = RoutedChatModel(script=[decision(reasoning="y" * 2500), decision()])
    LLMJudge(model).judge(run)
    feedback = model.calls[1][-1]
    assert isinstance(feedback, ToolMessage)  # answers the tool call, as tool-calling APIs require
    assert "field 'reasoning'" in feedback.content and "got 2500 characters" in feedback.content


def test_judge_gives_up_as_uncertain(run: Trajectory) -> None:
    model = RoutedChatModel(script=["no", "still no", "never"])
    verdict, _ = LLMJudge(model, JudgeConfig(max_attempts=3)).judge_with_usage(run)
    assert verdict.status == VerdictStatus.UNCERTAIN and "no usable verdict" in verdict.reason
    assert len(model.calls) == 3


def test_model_errors_count_as_attempts(run: Trajectory) -> None:
    model = RoutedChatModel(script=[TimeoutError("read timed out"), decision()])
    assert LLMJudge(model).judge(run).status == VerdictStatus.PASS


def test_uncertain_is_kept(run: Trajectory) -> None:
    model = RoutedChatModel(script=[decision("uncertain", reasoning="The log is cut before the submission.")])
    assert LLMJudge(model).judge(run).status == VerdictStatus.UNCERTAIN


def test_judge_prompt_is_redacted(run: Trajectory) -> None:
    leaky = run.model_copy(update={"steps": [*run.steps, Step(action="env", observation="DB_PASSWORD=hunter2-prod-77")]})
    model = RoutedChatModel(script=[decision()])
    LLMJudge(model).judge(leaky)
    text = model.calls[0][-1].content
    assert "hunter2-prod-77" not in text and "DB_PASSWORD=[REDACTED:password]" in text


def long_run(n: int = 200) -> Trajectory:
    steps = [Step(action=f"python step_{i}.py", observation=f"output {i} " + "x" * 400, exit_code=0) for i in range(n)]
    return Trajectory(task=TaskRef(id="long", instruction="Make the build green."), steps=steps,
                      submission="diff --git a/x b/x\n+fixed")


def test_long_runs_are_trimmed_deterministically() -> None:
    t = long_run()
    a = render_trajectory(t, budget_chars=8_000)
    assert a == render_trajectory(t, budget_chars=8_000)
    assert len(a) <= 8_000
    assert "Make the build green." in a and "python step_0.py" in a and "python step_199.py" in a
    assert "steps cut (steps" in a and "python step_100.py" not in a
    assert a.rstrip().endswith("+fixed")
    full = render_trajectory(t, budget_chars=10_000_000)
    assert "steps cut" not in full and "python step_100.py" in full


def test_judge_marks_the_cut(run: Trajectory) -> None:
    model = RoutedChatModel(script=[decision()])
    LLMJudge(model, JudgeConfig(budget_tokens=2_000)).judge(long_run())
    assert "shortened to fit" in model.calls[0][-1].content


def test_label_judge() -> None:
    labelled = Trajectory(task=TaskRef(id="a"), verdict=Verdict(status=VerdictStatus.FAIL, reason="tests failed", source="tests"))
    assert LabelJudge().judge(labelled).status == VerdictStatus.FAIL
    assert LabelJudge().judge(Trajectory(task=TaskRef(id="b"))).status == VerdictStatus.UNCERTAIN


class Small(BaseModel):
    name: str = Field(max_length=10)


def test_structured_call_check_and_exhaustion() -> None:
    model = RoutedChatModel(script=[{"name": "bad"}, {"name": "good"}])
    result = structured_call(model, Small, [HumanMessage("go")], check=lambda v: "say good" if v.name == "bad" else None)
    assert result.value.name == "good" and result.attempts == 2 and result.errors == ["say good"]
    with pytest.raises(StructuredCallError) as info:
        structured_call(RoutedTextModel(script=["{}"]), Small, [HumanMessage("go")], max_attempts=2)
    assert len(info.value.errors) == 2 and "field 'name'" in info.value.errors[0]


def test_invalid_tool_call_arguments_are_fed_back() -> None:
    broken = AIMessage("", invalid_tool_calls=[{"name": "Small", "args": "{name: ", "id": "1", "error": "bad json"}])
    model = RoutedChatModel(script=[broken, {"name": "ok"}])
    result = structured_call(model, Small, [HumanMessage("go")])
    assert result.value.name == "ok" and "not valid JSON" in result.errors[0]


def test_json_helpers_and_labels() -> None:
    assert extract_json_object('noise {"a": 1} {"b": 2}') == {"a": 1}
    assert extract_json_object('```json\n{"a": {"b": [1]}}\n```') == {"a": {"b": [1]}}
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json_object("[1, 2]")
    assert model_label("openai:gpt-4o-mini") == "openai:gpt-4o-mini"
    assert model_label(RoutedChatModel(model_name="fake-1")) == "fake-1"
    with pytest.raises(FileNotFoundError, match="no prompt template"):
        fill("does_not_exist")
