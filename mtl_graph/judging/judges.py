"""Judges: who decides whether a run passed. `LLMJudge` is the strict verifier; `LabelJudge` keeps log labels.

A test-based judge (the task's check command in a sandbox) lives with the graph; it implements the same
`Judge` protocol, so ingest and the graph can take any of them.
"""

from __future__ import annotations

from functools import partial

from typing import Literal, Protocol, runtime_checkable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.llm.retry import describe
from mtl_graph.llm.scripted import answerable
from mtl_graph.core.rendering import CHARS_PER_TOKEN, render_trajectory
from mtl_graph.core.templates import render_template
from mtl_graph.redaction.redact import Redactor
from mtl_graph.llm.structured import StructuredCallError, structured_call
from mtl_graph.core.trajectory import TokenUsage, Trajectory, Verdict, VerdictStatus

fill = partial(render_template, "mtl_graph.judging")
"""A template of prompts/ with its $placeholders filled (a missing value is a ValueError: a bug, not bad input)."""


@runtime_checkable
class Judge(Protocol):
    """Decides pass / fail / uncertain for a run, with a reason."""

    def judge(self, trajectory: Trajectory) -> Verdict:
        """The verdict on trajectory."""
        ...


@answerable  # a scripted model's `answers.judge` is checked against it when its script loads
class JudgeDecision(BaseModel):
    """The judge's structured answer: one boolean per criterion, the reasoning, the verdict."""

    model_config = ConfigDict(extra="ignore")

    spec_satisfied: bool = Field(description="Every requirement of the task is met, edge cases and formats included.")
    technically_correct: bool = Field(description="The change is correct in general, not special-cased or test-tampering.")
    no_regressions: bool = Field(description="Nothing that worked before is broken.")
    interfaces_respected: bool = Field(description="Required names, signatures, locations and output formats are kept.")
    verified_with_evidence: bool = Field(description="Real commands and outputs in the transcript demonstrate the result.")
    reasoning: str = Field(min_length=1, max_length=2_000, description="2-6 sentences citing the evidence.")
    verdict: Literal["pass", "fail", "uncertain"] = Field(description="pass only if all five criteria hold.")


class JudgeConfig(BaseModel):
    """How the LLM judge reads a run."""

    model_config = ConfigDict(extra="forbid")

    budget_tokens: int = Field(default=24_000, ge=1_000)
    """Tokens of transcript the judge sees; longer runs are trimmed (task, first/last steps, submission kept)."""
    observation_chars: int = Field(default=1_500, ge=100)
    """Characters kept of each observation."""
    max_attempts: int = Field(default=3, ge=1, le=10)
    """Model calls before giving up (then the verdict is uncertain)."""
    json_mode: bool | None = None
    """Force JSON-text answers (True), tool calling (False), or pick by model capability (None)."""


class LLMJudge:
    """A strict pass/fail verifier for code-editing runs; defaults to FAIL when in doubt."""

    def __init__(self, model: BaseChatModel, config: JudgeConfig | None = None,
                 redactor: Redactor | None = None) -> None:
        self.model = model
        self.config = config or JudgeConfig()
        self.redactor = redactor or Redactor()

    def prompt(self, trajectory: Trajectory) -> list[SystemMessage | HumanMessage]:
        """The judge's messages for trajectory (redacted, trimmed to the budget)."""
        budget = self.config.budget_tokens * CHARS_PER_TOKEN
        text = render_trajectory(self.redactor.redact_trajectory(trajectory), budget, self.config.observation_chars)
        cut = "steps cut" in text or "characters cut" in text
        note = ("\nThe transcript was shortened to fit; the cut is marked. Judge from what is shown and from "
                "the final submission.\n" if cut else "")
        return [SystemMessage(fill("judge_system")), HumanMessage(fill("judge", trajectory=text, cut_note=note))]

    def judge(self, trajectory: Trajectory) -> Verdict:
        return self.judge_with_usage(trajectory)[0]

    def judge_with_usage(self, trajectory: Trajectory) -> tuple[Verdict, TokenUsage]:
        """The verdict and the tokens it cost; a judge that gives no usable answer yields `uncertain`."""
        try:
            result = structured_call(self.model, JudgeDecision, self.prompt(trajectory),
                                     max_attempts=self.config.max_attempts, json_mode=self.config.json_mode)
        except StructuredCallError as exc:
            if exc.provider_error is not None:  # the model never answered: no judgement, not an uncertain one
                error = f"model provider error: judge: {describe(exc.provider_error)}"
                return Verdict.infrastructure_error(error), exc.usage
            reason = f"the judge gave no usable verdict: {exc.errors[-1] if exc.errors else exc}"
            return Verdict(status=VerdictStatus.UNCERTAIN, reason=reason, source="judge"), exc.usage
        return decision_to_verdict(result.value), result.usage


def decision_to_verdict(decision: JudgeDecision) -> Verdict:
    """A pass with any failed criterion is turned into a fail: the checks outrank the headline."""
    checks = {name: getattr(decision, name) for name in (
        "spec_satisfied", "technically_correct", "no_regressions", "interfaces_respected", "verified_with_evidence")}
    failed = [name for name, ok in checks.items() if not ok]
    status = VerdictStatus(decision.verdict)
    reason = decision.reasoning.strip()
    if status == VerdictStatus.PASS and failed:
        status = VerdictStatus.FAIL
        reason = f"{reason} [pass overruled: criteria not met: {', '.join(failed)}]"
    elif failed:
        reason = f"{reason} [criteria not met: {', '.join(failed)}]"
    return Verdict(status=status, reason=reason, source="judge")


class LabelJudge:
    """Keeps the verdict that came with the log; runs without one are uncertain."""

    def judge(self, trajectory: Trajectory) -> Verdict:
        if trajectory.verdict is not None:
            return trajectory.verdict
        return Verdict(status=VerdictStatus.UNCERTAIN, reason="the log carries no label", source="given")
