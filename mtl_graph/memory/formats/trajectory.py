"""Trajectory: the task and every command with its observation, failed steps kept; built without a model."""

from __future__ import annotations

from functools import partial
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.core.trajectory import Outcome, Trajectory
from mtl_graph.core.rendering import clip_middle
from mtl_graph.memory.formats import MemoryFormat, register
from mtl_graph.memory.base import MAX_LONG, MAX_STEPS, LongText, MemoryBase, Provenance


class TrajectoryStep(BaseModel):
    """One action of a trajectory memory: the command and what it printed (reasoning dropped)."""

    model_config = ConfigDict(extra="forbid")

    command: LongText
    """The shell command or tool call, as text."""
    observation: str = Field(default="", max_length=MAX_LONG)
    """What the command printed (full; cut only when rendered)."""
    exit_code: int | None = None
    """Exit status, when known."""


class TrajectoryMemory(MemoryBase):
    """The task and every command with its observation; failed steps kept."""

    GIVEN_FIELDS: ClassVar[frozenset[str]] = frozenset({"task"})
    type: Literal["trajectory"] = "trajectory"
    task: LongText
    """The task's instruction text (the retrieval key)."""
    steps: list[TrajectoryStep] = Field(min_length=1, max_length=MAX_STEPS)
    """Every action in order."""


def _body(memory: TrajectoryMemory, observation_chars: int) -> str:
    lines = [f"Task: {memory.task}"]
    for n, step in enumerate(memory.steps, 1):
        obs = step.observation
        if len(obs) > observation_chars:
            obs = obs[:observation_chars] + f"... [cut {len(obs) - observation_chars} chars]"
        code = "" if step.exit_code is None else f" (exit {step.exit_code})"
        lines.append(f"{n}. $ {step.command}{code}\n   {obs}" if obs else f"{n}. $ {step.command}{code}")
    return "\n".join(lines)


def build(run: Trajectory, outcome: Outcome, provenance: Provenance) -> tuple[TrajectoryMemory, list[str]]:
    """The run's task and actions as they are; a run longer than MAX_STEPS keeps its first and last halves."""
    fit = partial(clip_middle, limit=MAX_LONG - 64)  # the marker says how much was cut; room left for it
    steps = [TrajectoryStep(command=fit(s.action.strip()), observation=fit(s.observation),
                            exit_code=s.exit_code) for s in run.steps if s.action.strip()]
    if not steps:
        raise ValueError("the run has no actions")
    warnings = []
    if len(steps) > MAX_STEPS:
        warnings.append(f"trajectory: kept the first and last {MAX_STEPS // 2} of {len(steps)} steps")
        steps = steps[: MAX_STEPS // 2] + steps[-(MAX_STEPS // 2):]
    memory = TrajectoryMemory(task=fit(run.task.instruction), steps=steps, outcome=outcome,
                              sources=[provenance.model_copy(update={"distill_model": None})])
    return memory, warnings


TRAJECTORY = register(MemoryFormat(
    name="trajectory", memory=TrajectoryMemory, rank=10, summary="the task and every command with its output",
    key=lambda m: m.task,
    label=lambda m: f"past trajectory{m.outcome_tag()}",
    body=_body,
    build=build, uses_plan=False, given=("task", "steps.observation")))
