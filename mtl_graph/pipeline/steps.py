"""A run's step hook, the one for every host: the MTL graph's default agent, a wrapped graph, the middleware.

Each host puts it at `configurable["__mtl_on_step"]` and our tools (`bash`, `submit`, `search_memories`) call it
after each call (`agent.tools.tell_step`). It tells the step as an event and, with `re_retrieve`, after the run's
first failing test run retrieves once more with the failure as the query (`MemoryRefresh`); what that found is
recorded in that step's `args["re_retrieved"]`, so whether a run already re-retrieved, and what, is read back
from its own messages: a run resumed in a new process does not re-retrieve twice, and no host keeps state of its
own for it."""

from __future__ import annotations

import threading
from typing import Any, Iterable

from langchain_core.messages import BaseMessage

from mtl_graph.agent.tools import recorded_step
from mtl_graph.core.trajectory import Step
from mtl_graph.pipeline import events
from mtl_graph.pipeline.refresh import MemoryRefresh

REFRESH_ARG = "re_retrieved"
"""The step's `args` key holding what re-retrieval found after it (present, maybe empty, once it was tried)."""


def refreshes_in(messages: Iterable[BaseMessage]) -> list[list[dict[str, Any]]]:
    """What each re-retrieval of these messages found (one entry per try; a run makes at most one). Only our bash
    tool's recorded steps count: another tool's artifact, whatever it holds, neither stops the run's re-retrieval
    nor names memories it showed."""
    steps = [step for m in messages if (step := recorded_step(m)) is not None and step["tool"] == "bash"]
    return [s["args"][REFRESH_ARG] for s in steps
            if isinstance(s.get("args"), dict) and isinstance(s["args"].get(REFRESH_ARG), list)]


def re_retrieved_in(messages: Iterable[BaseMessage]) -> list[dict[str, Any]]:
    """The memories the run's re-retrieval showed (the run's `re_retrieved`)."""
    return [hit for found in refreshes_in(messages) for hit in found if isinstance(hit, dict)]


def messages_of(runtime: Any) -> list[BaseMessage]:
    state = getattr(runtime, "state", None)
    return list(state.get("messages") or []) if isinstance(state, dict) else []


class RunSteps:
    """`hook(step, runtime)`: tell the step; re-retrieve after the run's first failing test run (when `refresh`).

    `since` is where this run's messages start in the agent's (a middleware's thread keeps earlier turns). The lock
    serialises a reply's parallel tool calls: two failing test runs in one reply re-retrieve once."""

    def __init__(self, refresh: MemoryRefresh | None = None, since: int = 0) -> None:
        self.refresh, self.since, self.lock = refresh, since, threading.Lock()

    def __call__(self, step: Step, runtime: Any = None) -> str | None:
        events.step(step)
        if self.refresh is None or step.tool != "bash":
            return None
        with self.lock:
            if self.refresh.used:
                return None
            if refreshes_in(messages_of(runtime)[self.since:]):  # before a resume: it was tried already
                self.refresh.used = True
                return None
            note = self.refresh(step)
            if self.refresh.used:
                step.args[REFRESH_ARG] = list(self.refresh.hits)
            return note
