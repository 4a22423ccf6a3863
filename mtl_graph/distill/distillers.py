"""Distillers: one per registered memory format (mtl_graph/memory/formats/), derived from its declaration.

A format with a `build` function (trajectory) is made from the run directly, with no model; any other is written
by a model: its success or failure prompt by the verdict, its draft schema through the shared structured-call
helper (validation, error-fed retries), a leak check for the task-free formats, then the memory built.

`distill(trajectory, formats, model)` redacts the run and returns the memories, the formats that could not be
distilled (with reasons — never silently dropped), warnings and token usage.
"""

from __future__ import annotations

from functools import partial

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mtl_graph.core.errors import MTLError
from mtl_graph.core.trajectory import TokenUsage, Trajectory
from mtl_graph.distill.leaks import find_leaks, task_specifics
from mtl_graph.core.rendering import CHARS_PER_TOKEN, render_trajectory
from mtl_graph.core.templates import render_template
from mtl_graph.distill.quality import junk_reasons
from mtl_graph.redaction.redact import Redactor
from mtl_graph.llm.scripted import answerable
from mtl_graph.llm.chat import chat_model, model_label
from mtl_graph.llm.structured import Revise, StructuredCallError, describe_validation_error, structured_call
from mtl_graph.memory import formats as registry
from mtl_graph.memory.formats import MemoryFormat
from mtl_graph.memory.formats.insight import InsightDraft  # the built-in drafts, importable here too
from mtl_graph.memory.formats.summary import SummaryDraft
from mtl_graph.memory.formats.workflow import WorkflowDraft
from mtl_graph.memory.base import Memory, MemoryType, Outcome, Provenance, memory_type_of, strings_of

# The drafts a scripted model's `answers` hold by alias (insight, summary, workflow): checked when its script loads.
answerable(InsightDraft)
answerable(SummaryDraft)
answerable(WorkflowDraft)

fill = partial(render_template, "mtl_graph.distill")
"""A template of prompts/ with its $placeholders filled (a missing value is a ValueError: a bug, not bad input)."""


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


def variant(outcome: Outcome) -> str:
    """Which prompt a run gets: a failed run's, or a successful one's (an unverified run is told so)."""
    return "failure" if outcome == Outcome.FAILURE else "success"


class Distiller(ABC):
    """Makes one memory format from a (redacted) run."""

    def __init__(self, fmt: MemoryFormat) -> None:
        self.format = fmt

    @property
    def memory_type(self) -> MemoryType:
        return MemoryType(self.format.name)

    @property
    def needs_model(self) -> bool:
        return self.format.needs_model

    @abstractmethod
    def distill(self, trajectory: Trajectory, outcome: Outcome, provenance: Provenance,
                model: BaseChatModel | None, config: DistillConfig) -> Distilled: ...


class BuiltDistiller(Distiller):
    """A format its declaration builds from the run directly (trajectory): no model call."""

    def distill(self, trajectory: Trajectory, outcome: Outcome, provenance: Provenance,
                model: BaseChatModel | None, config: DistillConfig) -> Distilled:
        assert self.format.build is not None
        try:
            memory, warnings = self.format.build(trajectory, outcome, provenance)
        except ValidationError as exc:
            raise DistillError(f"invalid {self.format.name} memory: {describe_validation_error(exc)}") from None
        except ValueError as exc:
            raise DistillError(str(exc)) from None
        return Distilled(memory, warnings=warnings)  # type: ignore[arg-type]


class ModelDistiller(Distiller):
    """A model-written format: prompt by outcome, structured answer, optional leak check, memory built."""

    def prompt(self, run_outcome: Outcome, **values: str) -> str:
        assert self.format.prompts is not None
        success, failure = self.format.prompts
        return fill(failure if variant(run_outcome) == "failure" else success, self.format.prompt_dir, **values)

    def messages(self, trajectory: Trajectory, outcome: Outcome, config: DistillConfig) -> list[Any]:
        reason = trajectory.verdict.reason if trajectory.verdict else ""
        text = render_trajectory(trajectory, config.budget_tokens * CHARS_PER_TOKEN, config.observation_chars)
        prompt = self.prompt(outcome, trajectory=text, outcome=outcome_text(outcome, reason),
                             verdict_reason=reason or "(no reason given)")
        return [SystemMessage(fill("distill_system")), HumanMessage(prompt)]

    def distill(self, trajectory: Trajectory, outcome: Outcome, provenance: Provenance,
                model: BaseChatModel | None, config: DistillConfig) -> Distilled:
        assert model is not None and self.format.draft is not None
        name = self.format.name
        specifics = task_specifics(trajectory) if self.format.task_free and config.leak_check else set()
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
            result = structured_call(model, self.format.draft, messages,
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
            warnings.append(f"{name}: leaked task specifics {leaks['asked'][:12]}; asked for a "
                            f"general version" + (f", still leaks {leaks['final'][:12]}" if leaks.get("final") else ""))
        if leaks.get("final") and config.on_leak == "fail":
            raise DistillError(f"leaks task specifics after a retry: {', '.join(leaks['final'][:12])}",
                               attempts=result.attempts, usage=result.usage)
        try:
            from_run = self.format.from_run(trajectory) if self.format.from_run else {}
            memory = self.format.memory(outcome=outcome, sources=[provenance], **result.value.model_dump(),
                                        **from_run)
        except ValidationError as exc:
            raise DistillError(f"invalid {name} memory: {describe_validation_error(exc)}",
                               attempts=result.attempts, usage=result.usage) from None
        return Distilled(memory, result.usage, warnings)  # type: ignore[arg-type]

    def junk(self, text: str, trajectory: Trajectory, outcome: Outcome, config: DistillConfig) -> list[str]:
        """Quality-gate reasons for a draft (task-free formats must not copy the task either)."""
        if not config.quality_gate:
            return []
        instructions = self.prompt(outcome, trajectory="", outcome="", verdict_reason="")
        task = trajectory.task.instruction if self.format.task_free else ""
        return junk_reasons(text, prompts=[instructions, fill("distill_system")], task=task)


def distiller_for(fmt: MemoryFormat) -> Distiller:
    """The distiller a format's declaration calls for."""
    return ModelDistiller(fmt) if fmt.needs_model else BuiltDistiller(fmt)


class _DistillTable(Mapping[str, Distiller]):
    """Format name -> its distiller, for every format registered now (a MemoryType key works too)."""

    def __getitem__(self, name: str) -> Distiller:
        fmt = registry.find(str(name))
        if fmt is None:
            raise KeyError(name)
        return distiller_for(fmt)

    def __iter__(self) -> Iterator[str]:
        return iter(registry.names())

    def __len__(self) -> int:
        return len(registry.names())


DISTILLERS: Mapping[str, Distiller] = _DistillTable()
"""The distill table, derived from the format registry."""


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
    chat = chat_model(model) if model is not None else None
    run = (redactor or Redactor()).redact_trajectory(trajectory)
    outcome = run.verdict.outcome if run.verdict else Outcome.UNKNOWN
    content_hash = trajectory.content_hash()  # hashes the whole run: once
    provenance = Provenance(run_id=run_id or f"run-{content_hash[:32]}", source_task_id=run.task.id,
                            domain=run.task.domain, task_model=run.model, distill_model=label, code=run.code)
    result = DistillResult(task_id=run.task.id, content_hash=content_hash, outcome=outcome)
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
