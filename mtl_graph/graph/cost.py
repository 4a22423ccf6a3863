"""What a run's model calls cost, stage by stage: calls and tokens, counted while each node runs.

A LangChain callback registered as a configure hook sees every chat model call made inside the node (a plan,
the judge, each distiller attempt, the agent's turns in execute), whichever model and however it is called, so
a stage's cost needs no plumbing through the code that calls the model. Tokens come from the providers' usage
metadata (a model that reports none counts calls only)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook

AGENT_STAGE = "execute"
"""The stage whose calls are the agent's own; every other stage's calls are the memory method's extra cost."""


class CostCounter(BaseCallbackHandler):
    """Counts model calls and their input / output tokens."""

    def __init__(self) -> None:
        self.calls = self.input = self.output = 0
        self._lock = threading.Lock()  # a node may fan its calls out over threads

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        with self._lock:
            self.calls += 1

    def on_llm_start(self, serialized: Any, prompts: Any, **kwargs: Any) -> None:
        with self._lock:
            self.calls += 1

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                with self._lock:
                    self.input += int(usage.get("input_tokens") or 0)
                    self.output += int(usage.get("output_tokens") or 0)

    def summary(self) -> dict[str, int]:
        return {"calls": self.calls, "input_tokens": self.input, "output_tokens": self.output}


_counter: ContextVar[CostCounter | None] = ContextVar("mtl_cost_counter", default=None)
register_configure_hook(_counter, inheritable=True)


@contextmanager
def counting() -> Iterator[CostCounter]:
    """Count the model calls made inside the block (and in what it starts: subgraphs, threads of its context)."""
    counter = CostCounter()
    token = _counter.set(counter)
    try:
        yield counter
    finally:
        _counter.reset(token)


def extra(cost: dict[str, dict[str, int]]) -> dict[str, int]:
    """The calls and tokens of every stage but the agent's own (plan, judge, distill, ...), summed."""
    total = {"calls": 0, "input_tokens": 0, "output_tokens": 0}
    for stage, counts in (cost or {}).items():
        if stage != AGENT_STAGE:
            for key in total:
                total[key] += int(counts.get(key, 0))
    return total
