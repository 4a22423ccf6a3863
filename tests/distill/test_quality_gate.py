"""The quality gate: model text that echoes the prompt or the task, holds placeholders, or carries no advice is
rejected with a reason (distilled memories and HyDE plans); ordinary advice passes."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from mtl_graph.distill.distillers import distill
from mtl_graph.distill.distillers import fill
from mtl_graph.distill.quality import echo_share, junk_reasons, plan_problems
from mtl_graph.llm.structured import structured_call, was_cut
from mtl_graph.distill.distillers import InsightDraft
from helpers.fake_models import RoutedChatModel, RoutedTextModel
from mtl_graph.core.trajectory import Step, Trajectory, Verdict, VerdictStatus
from mtl_graph.pipeline.prompting import prompt
from mtl_graph.core.task import TaskRef

FAILURE_PROMPT = fill("insight_failure", trajectory="", outcome="", verdict_reason="")
TASK = ("Write a function that parses ISO-8601 durations such as P3DT4H into a number of seconds, rejecting "
        "malformed input with a ValueError.")

GOOD = [
    "Run the test suite before and after every edit, and read the first failing assertion before changing code.",
    "When a task states an output format, compare your output byte for byte with an example before submitting.",
    "Reproduce the reported bug with a minimal script first; a fix you cannot observe failing is unverified.",
    "Check the interface the tests import (names and signatures) before writing the implementation.",
    "Prefer the standard library's parser over hand-written regular expressions when one exists for the format.",
    "If a command prints nothing, check its exit code instead of assuming success; $PATH lookups can fail silently.",
]
JUNK = {
    "prompt echo": "1 to 3 sentences: what went wrong (in general terms), the lesson, and how to avoid it — a concrete "
                   "check or habit that would have caught it.",
    "placeholder": "Title: $trajectory. Always consider the outcome before submitting your answer to the task.",
    "jinja field": "Apply {{ lesson }} whenever the tests fail after an edit to a parser module.",
    "insert marker": "Before submitting, <insert the lesson here> and verify the tests pass in the sandbox.",
    "task copy": TASK,
    "no advice": "The insight. It is good.",
    "repetition": "always check check check check check check check check check check the output and the logs first",
}


@pytest.mark.parametrize("text", GOOD)
def test_ordinary_advice_passes(text: str) -> None:
    assert junk_reasons(text, prompts=[FAILURE_PROMPT, fill("distill_system")], task=TASK) == []


@pytest.mark.parametrize("name", list(JUNK))
def test_junk_is_rejected_with_a_reason(name: str) -> None:
    reasons = junk_reasons(JUNK[name], prompts=[FAILURE_PROMPT, fill("distill_system")], task=TASK)
    assert reasons, name
    expected = {"prompt echo": "prompt", "placeholder": "placeholder", "jinja field": "placeholder",
                "insert marker": "placeholder", "task copy": "task", "no advice": "advice", "repetition": "repetition"}
    assert any(expected[name] in r for r in reasons), reasons


def test_echo_share_counts_shared_phrases() -> None:
    assert echo_share("one two three four five", "zero one two three four five six") == 1.0
    assert echo_share("one two three four five", "five four three two one") == 0.0
    assert echo_share("too short", "too short") == 0.0  # fewer words than the n-gram length


def _run(status: VerdictStatus) -> Trajectory:
    return Trajectory(task=TaskRef(id="durations", domain="parsing", instruction=TASK),
                      steps=[Step(action="python3 -m unittest", observation="FAILED (failures=1)", exit_code=1)],
                      verdict=Verdict(status=status, reason="tests failed", source="tests"))


def test_distiller_asks_once_then_reports_junk_as_not_distilled() -> None:
    echo = {"title": "Do not trust the output", "description": "ONE sentence saying in which situations this trap "
            "appears.", "content": JUNK["prompt echo"]}
    model = RoutedChatModel(script=[echo])
    result = distill(_run(VerdictStatus.FAIL), ["insight"], model)
    assert result.memories == []
    [failure] = result.failures
    assert failure.reason.startswith("quality gate:") and "prompt" in failure.reason
    assert len(model.calls) == 2  # one revision asked, with the reasons fed back
    assert "cannot be stored as a memory" in model.calls[1][-1].content
    assert result.usage["insight"] is not None


def test_distiller_keeps_a_revised_good_answer() -> None:
    echo = {"title": "Lesson", "description": "The insight applies here.", "content": JUNK["prompt echo"]}
    good = {"title": "Read the failing assertion first", "description": "Applies when a test run fails after an "
            "edit.", "content": GOOD[0]}
    model = RoutedChatModel(script=[echo, good])
    result = distill(_run(VerdictStatus.FAIL), ["insight"], model)
    assert not result.failures and result.memories[0].title == good["title"]


def test_gate_can_be_switched_off() -> None:
    from mtl_graph.distill.distillers import DistillConfig

    junk = {"title": "The insight", "description": "It is good to do things.", "content": "The insight. It is good."}
    result = distill(_run(VerdictStatus.FAIL), ["insight"], RoutedChatModel(script=[junk]),
                     config=DistillConfig(quality_gate=False))
    assert len(result.memories) == 1


def test_plan_that_repeats_the_plan_prompt_is_unusable() -> None:
    template = prompt("plan", instruction="")
    echoed = ("You are about to solve a coding task. Before starting, write a short plan: 3 to 5 sentences saying "
              "what kind of problem this is, how you will inspect the environment.")
    assert any("plan prompt" in p for p in plan_problems(echoed, template))
    assert plan_problems("", template) == ["empty plan"]
    fine = ("This is a parsing problem. I will list the files, read the tests to learn the expected interface, "
            "implement the parser, and run the unit tests until they pass.")
    assert plan_problems(fine, template) == []


def test_a_length_cut_answer_is_retried_with_a_shorter_request() -> None:
    cut = AIMessage(content='{"title": "Read the failing assertion", "description": "Applies when',
                    response_metadata={"finish_reason": "length"})
    good = {"title": "Read the failing assertion first", "description": "Applies when a test fails after an edit.",
            "content": GOOD[0]}
    assert was_cut(cut) and not was_cut(AIMessage(content="x", response_metadata={"finish_reason": "stop"}))
    model = RoutedTextModel(script=[cut, good])
    result = structured_call(model, InsightDraft, [], max_attempts=3)
    assert result.attempts == 2
    feedback = model.calls[1][-1].content
    assert "cut off at the output length limit" in feedback and "no JSON object" in feedback


def test_a_validation_error_raised_inside_the_model_call_is_fed_back() -> None:
    """OpenAI's json_schema structured output validates inside invoke and raises; that is the model's answer being
    invalid (seen with a real local model), not a provider failure: the error goes back to the model."""
    from langchain_core.runnables import RunnableLambda
    from pydantic import ValidationError

    good = {"title": "Read the failing assertion first", "description": "Applies when a test fails after an edit.",
            "content": GOOD[0]}
    seen: list[list] = []

    def answer(messages: list) -> dict:
        seen.append(list(messages))
        if len(seen) == 1:
            InsightDraft.model_validate({**good, "content": "One. Two. Three. Four. Five."})  # raises
        return {"raw": AIMessage(content=""), "parsed": InsightDraft.model_validate(good)}

    class ValidatingModel(RoutedChatModel):
        def with_structured_output(self, schema, **kwargs):  # type: ignore[override]
            return RunnableLambda(answer)

    result = structured_call(ValidatingModel(script=[good]), InsightDraft, [], max_attempts=3)
    assert result.attempts == 2 and "at most 3 sentences" in result.errors[0]
    assert "at most 3 sentences" in seen[1][-1].content
    with pytest.raises(ValidationError):  # the double really raises what the real parser raises
        InsightDraft.model_validate({**good, "content": "One. Two. Three. Four. Five."})
