"""Distillers: the four formats, success/failure prompts, validation retries, leaks, failures reported."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from mtl_graph.distill.distillers import DistillConfig, InsightDraft, distill
from mtl_graph.memory.formats._drafts import count_sentences
from mtl_graph.importers import load_file
from mtl_graph.distill.leaks import find_leaks, task_specifics
from helpers.fake_models import RoutedChatModel, RoutedTextModel
from mtl_graph.core.trajectory import Step, Trajectory, Verdict, VerdictStatus
from mtl_graph.memory.base import MemoryType, Outcome
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.formats.summary import SummaryMemory
from mtl_graph.memory.formats.trajectory import TrajectoryMemory
from mtl_graph.memory.formats.workflow import WorkflowMemory
from mtl_graph.core.task import TaskRef
from helpers.paths import LOGS

INSIGHT = {"title": "Reproduce before you edit",
           "description": "Applies when fixing a reported bug in an unfamiliar codebase.",
           "content": "Write a minimal reproduction first and watch it fail. After the edit, rerun it as evidence."}
WORKFLOW = {"goal": "Adding an optional parameter to an existing library function.",
            "actions": ["Locate the definition of <function>.", "Add the parameter with a backward-compatible default.",
                        "Exercise both modes with a small script.", "Run <test command>."]}
SUMMARY = {"task_summary": "A config loader needed a parameter to open files in binary mode. Callers pass a parser.",
           "experience_summary": "Python project with pytest. The agent edited the loader, checked both modes "
                                 "with a small script and ran the config tests, which passed."}
ANSWERS = {"InsightDraft": INSIGHT, "WorkflowDraft": WORKFLOW, "SummaryDraft": SUMMARY}


def by_schema(tool: str | None, messages: list) -> dict:
    return ANSWERS[tool or ""]


@pytest.fixture
def run() -> Trajectory:
    [t] = load_file(LOGS / "mini_swe_agent" / "pallets__flask-4992.traj.json", domain="swe-bench")
    return t.model_copy(update={"verdict": Verdict(status=VerdictStatus.PASS, reason="tests passed", source="tests")})


def test_all_four_formats_with_provenance(run: Trajectory) -> None:
    model = RoutedChatModel(route=by_schema, model_name="gpt-test")
    result = distill(run, ["insight", "workflow", "summary", "trajectory"], model)
    assert not result.failures and result.outcome == Outcome.SUCCESS
    kinds = {type(m) for m in result.memories}
    assert kinds == {InsightMemory, WorkflowMemory, SummaryMemory, TrajectoryMemory}
    for memory in result.memories:
        assert memory.outcome == Outcome.SUCCESS
        [src] = memory.sources
        assert (src.source_task_id, src.domain, src.task_model) == ("pallets__flask-4992", "swe-bench", "openai/gpt-5-mini")
        assert src.distill_model == (None if isinstance(memory, TrajectoryMemory) else "gpt-test")
    assert len(model.calls) == 3  # the trajectory memory is built without a model call
    traj = next(m for m in result.memories if isinstance(m, TrajectoryMemory))
    assert len(traj.steps) == len(run.steps) and traj.task == run.task.instruction
    assert "hunter2-local-dev" not in traj.model_dump_json()  # redacted before it reaches the pool


def test_success_and_failure_prompts_differ(run: Trajectory) -> None:
    model = RoutedChatModel(route=by_schema)
    distill(run, ["insight"], model)
    failed = run.model_copy(update={"verdict": Verdict(status=VerdictStatus.FAIL, reason="nested keys lost")})
    distill(failed, ["insight"], model)
    ok_prompt, fail_prompt = model.calls[0][-1].content, model.calls[1][-1].content
    assert "anti-pattern" in fail_prompt and "nested keys lost" in fail_prompt
    assert "anti-pattern" not in ok_prompt and "Outcome: success" in ok_prompt
    assert "hunter2-local-dev" not in ok_prompt and "[REDACTED:password]" in ok_prompt


def test_uncertain_verdict_gives_unknown_outcome(run: Trajectory) -> None:
    unsure = run.model_copy(update={"verdict": Verdict(status=VerdictStatus.UNCERTAIN)})
    model = RoutedChatModel(route=by_schema)
    result = distill(unsure, ["summary"], model)
    assert result.memories[0].outcome == Outcome.UNKNOWN
    assert "not verified" in model.calls[0][-1].content


def test_json_mode_fallback(run: Trajectory) -> None:
    import json

    model = RoutedTextModel(script=[f"Sure!\n{json.dumps(INSIGHT)}"])
    result = distill(run, ["insight"], model)
    assert result.memories and result.memories[0].title == INSIGHT["title"]


@pytest.mark.parametrize(
    "bad",
    [
        "```json\n{\"title\": \"x\",",                             # malformed JSON
        AIMessage(""),                                            # empty
        "I cannot help with that request.",                       # refusal
        {"title": "Only a title"},                                # missing fields
        {**INSIGHT, "content": "Verify. " * 200},                 # over-long (and too many sentences)
        {**INSIGHT, "description": "First sentence. Second sentence."},  # not one sentence
    ],
    ids=["malformed", "empty", "refusal", "missing", "overlong", "two-sentences"],
)
def test_bad_answers_are_retried_with_the_error(run: Trajectory, bad: object) -> None:
    model = RoutedChatModel(script=[bad, INSIGHT])
    result = distill(run, ["insight"], model)
    assert [m.title for m in result.memories] == [INSIGHT["title"]]
    assert "could not be used" in model.calls[1][-1].content


def test_not_distilled_after_bounded_retries_is_reported(run: Trajectory) -> None:
    model = RoutedChatModel(script=[{"title": "t"}], model_name="m")
    result = distill(run, ["insight", "trajectory"], model, config=DistillConfig(max_attempts=2))
    assert [type(m) for m in result.memories] == [TrajectoryMemory]
    [failure] = result.failures
    assert failure.format == MemoryType.INSIGHT and failure.attempts == 2 and "field 'description'" in failure.reason
    assert len(model.calls) == 2


def test_leak_is_detected_and_retried_once(run: Trajectory) -> None:
    leaky = {**INSIGHT, "content": "Open src/flask/config.py and change from_file first. Then run the tests."}
    model = RoutedChatModel(script=[leaky, INSIGHT])
    result = distill(run, ["insight"], model)
    assert result.memories and not result.failures
    assert "src/flask/config.py" in model.calls[1][-1].content and "general version" in model.calls[1][-1].content
    assert any("leaked task specifics" in w for w in result.warnings)


def test_persistent_leak_fails_or_is_kept_by_configuration(run: Trajectory) -> None:
    leaky = {**WORKFLOW, "actions": ["Edit src/flask/config.py.", "Run tests/test_config.py."]}
    result = distill(run, ["workflow"], RoutedChatModel(script=[leaky]))
    assert not result.memories and "leaks task specifics after a retry" in result.failures[0].reason
    kept = distill(run, ["workflow"], RoutedChatModel(script=[leaky]), config=DistillConfig(on_leak="keep"))
    assert kept.memories and "still leaks" in kept.warnings[0]


def test_summaries_may_name_specifics(run: Trajectory) -> None:
    specific = {**SUMMARY, "task_summary": "Add a text flag to flask.Config.from_file(). Binary parsers need it."}
    model = RoutedChatModel(script=[specific])
    assert distill(run, ["summary"], model).memories


def test_token_usage_is_recorded_per_format(run: Trajectory) -> None:
    msg = AIMessage("", tool_calls=[{"name": "InsightDraft", "args": INSIGHT, "id": "1"}],
                    usage_metadata={"input_tokens": 1200, "output_tokens": 80, "total_tokens": 1280})
    result = distill(run, ["insight", "trajectory"], RoutedChatModel(script=["nope", msg]))
    assert result.usage["insight"].input == 1200 and result.usage["trajectory"].input == 0
    assert result.total_usage.output == 80


def test_no_model_and_empty_runs_are_reported() -> None:
    empty = Trajectory(task=TaskRef(id="e", instruction="do it"), steps=[Step(action="  ")])
    result = distill(empty, ["trajectory", "insight"], None)
    reasons = {f.format: f.reason for f in result.failures}
    assert reasons == {MemoryType.TRAJECTORY: "the run has no actions", MemoryType.INSIGHT: "no model given to distil with"}
    with pytest.raises(ValueError, match="unknown memory type"):
        distill(empty, ["insights"], None)


def test_leak_detection_heuristics(run: Trajectory) -> None:
    specifics = task_specifics(run)
    assert {"src/flask/config.py", "from_file"} <= specifics
    assert "setup.py" not in specifics and "ValueError" not in specifics
    assert find_leaks("Call from_file with text=False", specifics) == ["from_file"]
    assert find_leaks("Run the test suite before submitting; raise ValueError on bad input.", specifics) == []


def test_sentence_counting() -> None:
    assert count_sentences("One. Two! Three?") == 3
    assert count_sentences("Use a tool, e.g. grep, to search. Then edit.") == 2
    with pytest.raises(ValueError):
        InsightDraft(title="t" * 5, description="One. Two.", content="ok content here.")


@pytest.mark.parametrize("fmt", ["insight", "workflow", "summary"])
@pytest.mark.parametrize("variant", ["success", "failure"])
def test_every_template_fills(fmt: str, variant: str) -> None:
    from mtl_graph.distill.distillers import fill

    text = fill(f"{fmt}_{variant}", trajectory="<RUN>", outcome="<OUTCOME>", verdict_reason="<WHY>")
    assert "<RUN>" in text and "<OUTCOME>" in text and "$" not in text
    assert ("<WHY>" in text) == (variant == "failure")
