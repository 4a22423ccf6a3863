"""SWE-agent ``.traj`` files: ``trajectory`` (action / observation / thought / execution_time per step), ``info``
(exit_status, submission, model_stats), ``history`` (the chat, demonstrations marked ``is_demo``) and, in 1.x,
``replay_config`` (a JSON string holding the problem statement).

Demonstration files hold only ``history``: they are examples shown to the agent, not runs, and are skipped as
such. The task is the problem statement, never the templated instance prompt around it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mtl_graph.importers.common import (NotARunError, TrajectoryImportError, dig,
                                                   exit_code_of, given_verdict, stem, text_of, usage_of)
from mtl_graph.importers.registry import Importer, register
from mtl_graph.importers.task_text import task_text
from mtl_graph.core.trajectory import Step, Trajectory
from mtl_graph.core.task import TaskRef

SWE_AGENT = "swe-agent"


def looks_like_swe_agent(obj: Any) -> bool:
    """A SWE-agent run (``trajectory`` list) or demonstration (``history`` of role dicts and nothing else to run)."""
    if not isinstance(obj, dict):
        return False
    if isinstance(obj.get("trajectory"), list):
        return True
    history = obj.get("history")
    return (isinstance(history, list) and bool(history) and "messages" not in obj
            and all(isinstance(h, dict) and "role" in h for h in history))


def _replay_config(data: dict[str, Any]) -> dict[str, Any]:
    replay = data.get("replay_config")
    if isinstance(replay, str):
        try:
            replay = json.loads(replay)
        except (ValueError, RecursionError):
            replay = None
    return replay if isinstance(replay, dict) else {}


def _instruction(data: dict[str, Any], problem: dict[str, Any]) -> str | None:
    if isinstance(problem.get("text"), str) and problem["text"].strip():
        return problem["text"].strip()
    first = next((h for h in data.get("history") or [] if isinstance(h, dict) and h.get("role") == "user"
                  and not h.get("is_demo")), None)
    return task_text(text_of(first.get("content"))) if first else None


def _seconds(value: Any, where: str, path: Path) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TrajectoryImportError(path, f"{where} is not a number of seconds ({str(value)[:40]!r})") from None


def parse_swe_agent(data: Any, path: Path) -> list[Trajectory]:
    """The one run of a SWE-agent trajectory file."""
    if not isinstance(data, dict):
        raise TrajectoryImportError(path, f"a {SWE_AGENT} log is a JSON object")
    if not isinstance(data.get("trajectory"), list):
        if isinstance(data.get("history"), list):
            raise NotARunError(path, "not a run: a SWE-agent demonstration (a history to show the agent, no trajectory)")
        raise TrajectoryImportError(path, f"not a {SWE_AGENT} log")
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    replay = _replay_config(data)
    problem = replay.get("problem_statement") if isinstance(replay.get("problem_statement"), dict) else {}
    instruction = _instruction(data, problem)
    if not instruction:
        raise TrajectoryImportError(path, "no problem statement (replay_config) or user message (history)")
    steps = []
    for i, item in enumerate(data["trajectory"]):
        if not isinstance(item, dict):
            raise TrajectoryImportError(path, f"trajectory[{i}] is not an object")
        obs = text_of(item.get("observation"))
        steps.append(Step(reasoning=text_of(item.get("thought")).strip() or None,
                          action=text_of(item.get("action")).strip(), observation=obs, exit_code=exit_code_of(obs),
                          duration_s=_seconds(item.get("execution_time"), f"trajectory[{i}].execution_time", path)))
    try:
        tokens = usage_of(info.get("model_stats"), "info.model_stats", ("tokens_sent",), ("tokens_received",))
    except ValueError as exc:
        raise TrajectoryImportError(path, str(exc)) from None
    task_id = problem.get("id") or data.get("instance_id") or stem(path)
    submission = info.get("submission")
    return [Trajectory(task=TaskRef(id=str(task_id), instruction=instruction), steps=steps,
                       submission=submission if isinstance(submission, str) and submission else None,
                       verdict=given_verdict(info, data), model=dig(replay, "agent", "model", "name"),
                       tokens=tokens, exit_status=str(info["exit_status"]) if info.get("exit_status") else None)]


@register
class SWEAgentImporter(Importer):
    """SWE-agent's ``.traj`` files."""

    name = SWE_AGENT
    summary = "SWE-agent `.traj` files"
    order = 20

    def sniff(self, data: Any) -> bool:
        return looks_like_swe_agent(data)

    def parse(self, data: Any, path: Path) -> list[Trajectory]:
        return parse_swe_agent(data, path)
