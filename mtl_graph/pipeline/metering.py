"""What a run costs, stage by stage: each node's wall time, and its model calls and tokens, counted while it runs.

A LangChain callback registered as a configure hook sees every chat model call made inside the node (a plan,
the judge, each distiller attempt, the agent's turns in execute), whichever model and however it is called, so
a stage's cost needs no plumbing through the code that calls the model. Tokens come from the providers' usage
metadata (a model that reports none counts calls only); tool calls are counted by tool name. What the counts mean
for a comparison (the agent's own calls versus the memory method's extra) is in core/cost.py."""

from __future__ import annotations

import inspect
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from typing import Any, Callable, Iterator

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook
from langgraph.types import Overwrite

from mtl_graph.core.safe_text import safe_value


class CostCounter(BaseCallbackHandler):
    """Counts model calls and their input / output tokens, and tool calls by tool name."""

    def __init__(self) -> None:
        self.calls = self.input = self.output = 0
        self.tools: dict[str, int] = {}
        self._lock = threading.Lock()  # a node may fan its calls out over threads

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        with self._lock:
            self.calls += 1

    def on_llm_start(self, serialized: Any, prompts: Any, **kwargs: Any) -> None:
        with self._lock:
            self.calls += 1

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        name = str((serialized or {}).get("name") or kwargs.get("name") or "tool")
        with self._lock:
            self.tools[name] = self.tools.get(name, 0) + 1

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                with self._lock:
                    self.input += int(usage.get("input_tokens") or 0)
                    self.output += int(usage.get("output_tokens") or 0)

    def summary(self) -> dict[str, Any]:
        counts: dict[str, Any] = {"calls": self.calls, "input_tokens": self.input, "output_tokens": self.output}
        return {**counts, "tool_calls": dict(self.tools)} if self.tools else counts


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


def timed(name: str, starts_run: bool = False) -> Callable:
    """Record a node's wall time in state['timings'][name] and its model calls and tokens in state['cost'][name]
    (counted above; a node that called no model adds none); the run's first node replaces the previous run's.

    The update is made safe to serialise (`safe_value`): a file name of the agent's that is not UTF-8 must not
    make a checkpoint, the stream or the run log fail."""
    def done(update: Any, start: float, counter: Any) -> dict[str, Any]:
        timing = {name: round(time.perf_counter() - start, 4)}
        cost = {name: counter.summary()} if counter.calls else {}
        return {**safe_value(update or {}), "timings": Overwrite(timing) if starts_run else timing,
                "cost": Overwrite(cost) if starts_run else cost}

    def wrap(fn: Callable) -> Callable:
        if inspect.iscoroutinefunction(fn):  # an async node (a wrapped agent run with ainvoke)
            @wraps(fn)
            async def anode(*args: Any, **kwargs: Any) -> dict[str, Any]:
                start = time.perf_counter()
                with counting() as counter:
                    update = await fn(*args, **kwargs)
                return done(update, start, counter)

            return anode

        @wraps(fn)
        def node(*args: Any, **kwargs: Any) -> dict[str, Any]:
            start = time.perf_counter()
            with counting() as counter:
                update = fn(*args, **kwargs)
            return done(update, start, counter)

        return node

    return wrap
