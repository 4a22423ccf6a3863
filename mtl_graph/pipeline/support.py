"""Small pieces the nodes share: prompt templates, task coercion, node timing, the run log."""

from __future__ import annotations

import inspect
import json
import threading
import time
from functools import partial, wraps
from pathlib import Path
from typing import Any, Callable

from langgraph.types import Overwrite

from mtl_graph.llm.chat import model_label
from mtl_graph.core.safe_text import safe_json_text, safe_value
from mtl_graph.core.templates import render_template

prompt = partial(render_template, "mtl_graph.pipeline")
"""Render a prompt template shipped in mtl_graph/pipeline/prompts/."""


def memory_block(memories: list[Any], observation_chars: int = 300) -> str:
    """The block appended to the agent's system prompt: the header, then each memory fenced by a fresh token."""
    from mtl_graph.memory.fence import fence_memories

    fenced = fence_memories(memories, observation_chars=observation_chars)
    return prompt("memory_header", memories=fenced.text, boundary=fenced.boundary)


def model_name(model: Any) -> str:
    return model_label(model) or "unknown"


def open_default_pool() -> Any:
    """The pool at MTL_POOL. Within one process every caller shares one handle (`MemoryPool.open` caches open
    directories), which matters in a LangGraph server: the process holds the embedded pool's lock."""
    from mtl_graph.memory.pool.pool import MemoryPool
    from mtl_graph.config.environment import get_settings

    return MemoryPool.open(get_settings().pool)


def timed(name: str, starts_run: bool = False) -> Callable:
    """Record a node's wall time in state['timings'][name] and its model calls and tokens in state['cost'][name]
    (pipeline/metering.py; a node that called no model adds none); the run's first node replaces the previous run's.

    The update is made safe to serialise (`safe_value`): a file name of the agent's that is not UTF-8 must not
    make a checkpoint, the stream or the run log fail."""
    from mtl_graph.pipeline.metering import counting

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


_RUN_LOG_LOCK = threading.Lock()


def append_run_log(path: Path, record: dict[str, Any]) -> None:
    """Redact secrets, then append one JSON line (safe across threads of one process); importers read it back."""
    from mtl_graph.redaction.redact import redact_value

    line = safe_json_text(json.dumps(redact_value(record), ensure_ascii=False, default=str))
    path.parent.mkdir(parents=True, exist_ok=True)
    with _RUN_LOG_LOCK, open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
