"""Distillers: one per memory format, with success and failure prompts; trajectory memories need no model.

`distill(trajectory, formats, model)` redacts the run, picks the prompt variant from the verdict, calls the
model through the shared structured-call helper (validation, error-fed retries) and returns the memories, the
formats that could not be distilled (with reasons — never silently dropped), warnings and token usage.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any, Callable, Iterable, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from mtl_graph.experience.leaks import find_leaks, task_specifics
from mtl_graph.experience.prompting import CHARS_PER_TOKEN, clip_middle, fill, render_trajectory
from mtl_graph.experience.quality import junk_reasons
from mtl_graph.experience.redact import Redactor
from mtl_graph.experience.structured import (Revise, StructuredCallError, describe_validation_error, model_label,
                                             resolve_model, structured_call)
from mtl_graph.core.trajectory import TokenUsage, Trajectory
from mtl_graph.memory.models import (MAX_LONG, MAX_STEPS, MEMORY_CLASSES, Memory, MemoryType, Outcome, Provenance,
                                     TrajectoryMemory, TrajectoryStep, memory_type_of, strings_of)

from mtl_graph.core.errors import MTLError

_ABBREVIATIONS = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf|approx)\.", re.I)


def count_sentences(text: str) -> int:
    text = _ABBREVIATIONS.sub("abbr", text.strip())
    return len([s for s in re.split(r"(?<=[.!?])\s+(?=\S)", text) if s.strip()])


def _at_most(n: int) -> Callable[[str], str]:
    def check(text: str) -> str:
        if count_sentences(text) > n:
            raise ValueError(f"must be at most {n} sentence{'s' if n > 1 else ''} (got {count_sentences(text)})")
        return text

    return check


def _one_paragraph(text: str) -> str:
    if re.search(r"\n\s*\n", text.strip()):
        raise ValueError("must be one paragraph (no blank lines)")
    return text


def _text(lo: int, hi: int, *checks: Callable[[str], str]) -> Any:
    return Annotated[str, Field(min_length=lo, max_length=hi), *(AfterValidator(c) for c in checks)]


class InsightDraft(BaseModel):
    """A general lesson: title, one-sentence description, 1-3 sentences of advice; no task specifics."""

    model_config = ConfigDict(str_strip_whitespace=True, extra="ignore")

    title: _text(3, 120) = Field(description="Short imperative title, at most 12 words.")
    description: _text(10, 300, _at_most(1)) = Field(description="One sentence: when the insight applies.")
    content: _text(10, 700, _at_most(3)) = Field(description="1-3 sentences of actionable advice.")


class WorkflowDraft(BaseModel):
    """A goal (when this applies) and the reusable actions, in order."""

    model_config = ConfigDict(str_strip_whitespace=True, extra="ignore")

    goal: _text(10, 500) = Field(description="The kind of task this workflow applies to (1-2 sentences).")
    actions: list[_text(3, 300)] = Field(min_length=1, max_length=12, description="Reusable actions, in order.")


class SummaryDraft(BaseModel):
    """A 2-3 sentence task summary and one paragraph of experience."""

    model_config = ConfigDict(str_strip_whitespace=True, extra="ignore")

    task_summary: _text(10, 800, _at_most(4)) = Field(description="2-3 sentences on the task.")
    experience_summary: _text(20, 2_000, _one_paragraph) = Field(
        description="One paragraph: environment, key actions, outcome, why.")


class DistillConfig(BaseModel):
    """How runs are distilled."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=3, ge=1, le=10)
    """Model calls per format before the run is reported as not distilled."""
    budget_tokens: int = Field(default=16_000, ge=1_000)
    """Tokens of transcript shown to the distiller (longer runs are trimmed deterministically)."""
    observation_chars: int = Field(default=800, ge=100)
    """Characters kept of each observation in the prompt."""
    json_mode: bool | None = None
    """Force JSON-text answers (True), tool calling (False), or pick by model capability (None)."""
    leak_check: bool = True
    """Check insights and workflows for paths/identifiers/strings of the source run."""
    on_leak: Literal["fail", "keep"] = "fail"
    """What to do when a memory still leaks after one retry: report it as not distilled, or keep it (warned)."""
    quality_gate: bool = True
    """Reject memories that echo the prompt or the task, hold placeholder text, or carry no advice (one retry)."""


class DistillError(MTLError, RuntimeError):
    """One format of one run could not be distilled."""

    def __init__(self, reason: str, attempts: int = 0, usage: TokenUsage | None = None) -> None:
        self.reason, self.attempts, self.usage = reason, attempts, usage or TokenUsage()
        super().__init__(reason)


@dataclass
class Distilled:
    memory: Memory
    usage: TokenUsage = field(default_factory=TokenUsage)
    warnings: list[str] = field(default_factory=list)


class DistillFailure(BaseModel):
    """A format that was not distilled, and why."""

    format: MemoryType
    """The memory format."""
    reason: str
    """Why (the last validation error, a leak, a model failure...)."""
    attempts: int = 0
    """Model calls made."""


class DistillResult(BaseModel):
    """What one run yielded."""

    task_id: str
    """The source task."""
    content_hash: str
    """The run's content hash (the ingest ledger key)."""
    outcome: Outcome
    """The outcome the memories carry."""
    memories: list[Memory] = Field(default_factory=list)
    """One memory per distilled format."""
    failures: list[DistillFailure] = Field(default_factory=list)
    """Formats not distilled, with reasons."""
    warnings: list[str] = Field(default_factory=list)
    """Things worth knowing that did not stop distillation (kept leaks, cut steps)."""
    usage: dict[str, TokenUsage] = Field(default_factory=dict)
    """Tokens per format."""

    @property
    def total_usage(self) -> TokenUsage:
        return sum(self.usage.values(), TokenUsage())


def outcome_text(outcome: Outcome, reason: str) -> str:
    if outcome == Outcome.SUCCESS:
        return f"success ({reason})" if reason else "success"
    if outcome == Outcome.FAILURE:
        return "failure"
    return "unknown - the run was not verified; treat its approach as unconfirmed and do not claim it worked"


class Distiller(ABC):
    """Makes one memory format from a (redacted) run."""

    memory_type: MemoryType
    needs_model = True

    @abstractmethod
    def distill(self, trajectory: Trajectory, outcome: Outcome, provenance: Provenance,
                model: BaseChatModel | None, config: DistillConfig) -> Distilled: ...


class TrajectoryDistiller(Distiller):
    """The task and every action with its observation; built directly, no model call."""

    memory_type = MemoryType.TRAJECTORY
    needs_model = False

    def distill(self, trajectory: Trajectory, outcome: Outcome, provenance: Provenance,
                model: BaseChatModel | None, config: DistillConfig) -> Distilled:
        fit = partial(clip_middle, limit=MAX_LONG - 64)  # the marker says how much was cut; room left for it
        steps = [TrajectoryStep(command=fit(s.action.strip()), observation=fit(s.observation),
                                exit_code=s.exit_code) for s in trajectory.steps if s.action.strip()]
        if not steps:
            raise DistillError("the run has no actions")
        warnings = []
        if len(steps) > MAX_STEPS:
            warnings.append(f"trajectory: kept the first and last {MAX_STEPS // 2} of {len(steps)} steps")
            steps = steps[: MAX_STEPS // 2] + steps[-(MAX_STEPS // 2):]
        try:
            memory = TrajectoryMemory(task=fit(trajectory.task.instruction), steps=steps, outcome=outcome,
                                      sources=[provenance.model_copy(update={"distill_model": None})])
        except ValidationError as exc:
            raise DistillError(f"invalid trajectory memory: {describe_validation_error(exc)}") from None
        return Distilled(memory, warnings=warnings)


class ModelDistiller(Distiller):
    """A model-written format: prompt by outcome, structured answer, optional leak check, memory built."""

    def __init__(self, memory_type: MemoryType, schema: type[BaseModel], leak_checked: bool) -> None:
        self.memory_type, self.schema, self.leak_checked = memory_type, schema, leak_checked

    def messages(self, trajectory: Trajectory, outcome: Outcome, config: DistillConfig) -> list[Any]:
        reason = trajectory.verdict.reason if trajectory.verdict else ""
        variant = "failure" if outcome == Outcome.FAILURE else "success"
        text = render_trajectory(trajectory, config.budget_tokens * CHARS_PER_TOKEN, config.observation_chars)
        prompt = fill(f"{self.memory_type.value}_{variant}", trajectory=text, outcome=outcome_text(outcome, reason),
                      verdict_reason=reason or "(no reason given)")
        return [SystemMessage(fill("distill_system")), HumanMessage(prompt)]

    def distill(self, trajectory: Trajectory, outcome: Outcome, provenance: Provenance,
                model: BaseChatModel | None, config: DistillConfig) -> Distilled:
        assert model is not None
        specifics = task_specifics(trajectory) if self.leak_checked and config.leak_check else set()
        leaks: dict[str, list[str]] = {}
        junk: dict[str, list[str]] = {}
        messages = self.messages(trajectory, outcome, config)

        def check(draft: BaseModel) -> str | None:
            text = " ".join(strings_of(draft.model_dump()))
            found_junk = self.junk(text, trajectory, outcome, config)
            if found_junk:
                if "asked" in junk:
                    junk["final"] = found_junk
                    return None
                junk["asked"] = found_junk
                return Revise(fill("_junk", reasons="; ".join(found_junk)))
            found = find_leaks(text, specifics)
            if found and "asked" not in leaks:  # one retry asking for a general version, then decide
                leaks["asked"] = found
                return Revise(fill("_leak", leaks=", ".join(found[:12])))
            leaks["final"] = found
            return None

        try:
            result = structured_call(model, self.schema, messages,
                                     max_attempts=config.max_attempts,
                                     check=check, json_mode=config.json_mode)
        except StructuredCallError as exc:
            raise DistillError(f"no valid answer: {exc.errors[-1] if exc.errors else exc}",
                               attempts=len(exc.errors), usage=exc.usage) from None
        if junk.get("final"):
            raise DistillError(f"quality gate: {'; '.join(junk['final'])}", attempts=result.attempts,
                               usage=result.usage)
        warnings = []
        if leaks.get("asked"):
            warnings.append(f"{self.memory_type.value}: leaked task specifics {leaks['asked'][:12]}; asked for a "
                            f"general version" + (f", still leaks {leaks['final'][:12]}" if leaks.get("final") else ""))
        if leaks.get("final") and config.on_leak == "fail":
            raise DistillError(f"leaks task specifics after a retry: {', '.join(leaks['final'][:12])}",
                               attempts=result.attempts, usage=result.usage)
        try:
            memory = MEMORY_CLASSES[self.memory_type.value](outcome=outcome, sources=[provenance],
                                                            **result.value.model_dump())
        except ValidationError as exc:
            raise DistillError(f"invalid {self.memory_type.value} memory: {describe_validation_error(exc)}",
                               attempts=result.attempts, usage=result.usage) from None
        return Distilled(memory, result.usage, warnings)  # type: ignore[arg-type]


    def junk(self, text: str, trajectory: Trajectory, outcome: Outcome, config: DistillConfig) -> list[str]:
        """Quality-gate reasons for a draft (abstract formats must not copy the task either)."""
        if not config.quality_gate:
            return []
        variant = "failure" if outcome == Outcome.FAILURE else "success"
        instructions = fill(f"{self.memory_type.value}_{variant}", trajectory="", outcome="", verdict_reason="")
        task = trajectory.task.instruction if self.leak_checked else ""
        return junk_reasons(text, prompts=[instructions, fill("distill_system")], task=task)


DISTILLERS: dict[MemoryType, Distiller] = {
    MemoryType.TRAJECTORY: TrajectoryDistiller(),
    MemoryType.WORKFLOW: ModelDistiller(MemoryType.WORKFLOW, WorkflowDraft, leak_checked=True),
    MemoryType.SUMMARY: ModelDistiller(MemoryType.SUMMARY, SummaryDraft, leak_checked=False),
    MemoryType.INSIGHT: ModelDistiller(MemoryType.INSIGHT, InsightDraft, leak_checked=True),
}


def distill(trajectory: Trajectory, formats: Iterable[MemoryType | str], model: BaseChatModel | str | None = None,
            *, config: DistillConfig | None = None, redactor: Redactor | None = None,
            distill_model: str | None = None, run_id: str | None = None) -> DistillResult:
    """Distil one run into one memory per format; failures are reported in the result, never raised.

    distill_model names the model in provenance (default: the model string, or the model's own name); run_id
    names the run (default: a hash of the run's content, so an imported run keeps one id however often it is
    imported)."""
    config = config or DistillConfig()
    kinds = [f if isinstance(f, MemoryType) else memory_type_of(f) for f in formats]
    label = distill_model or model_label(model)
    chat = resolve_model(model) if model is not None else None
    run = (redactor or Redactor()).redact_trajectory(trajectory)
    outcome = run.verdict.outcome if run.verdict else Outcome.UNKNOWN
    provenance = Provenance(run_id=run_id or f"run-{trajectory.content_hash()[:32]}", source_task_id=run.task.id,
                            domain=run.task.domain, task_model=run.model, distill_model=label)
    result = DistillResult(task_id=run.task.id, content_hash=trajectory.content_hash(), outcome=outcome)
    if run.verdict is not None and run.verdict.is_error:  # the infrastructure ended it: nothing to learn
        result.failures = [DistillFailure(format=k, reason="the run ended in an infrastructure error")
                           for k in dict.fromkeys(kinds)]
        return result
    for kind in dict.fromkeys(kinds):
        distiller = DISTILLERS[kind]
        if distiller.needs_model and chat is None:
            result.failures.append(DistillFailure(format=kind, reason="no model given to distil with"))
            continue
        try:
            made = distiller.distill(run, outcome, provenance, chat, config)
        except DistillError as exc:
            result.failures.append(DistillFailure(format=kind, reason=exc.reason, attempts=exc.attempts))
            result.usage[kind.value] = exc.usage
            continue
        result.memories.append(made.memory)
        result.warnings.extend(made.warnings)
        result.usage[kind.value] = made.usage
    return result
