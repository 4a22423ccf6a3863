"""A run's cost, read: the model calls, tokens and tool calls its stages made (the graph's `cost`, counted by
pipeline/metering.py), split into the agent's own and the memory method's extra. It imports nothing else of ours: reports
read it without loading the graph."""

from __future__ import annotations

from typing import Any

AGENT_STAGE = "execute"
"""The stage whose calls are the agent's own; every other stage's calls are the memory method's extra cost."""
MEMORY_TOOLS = ("search_memories",)
"""Tools whose calls are the memory method's, wherever they happen (the agent's own retrieval, memory_tool.py)."""


def extra(cost: dict[str, dict[str, Any]]) -> dict[str, int]:
    """What the memory method costs a run: the model calls and tokens of every stage but the agent's own (plan,
    judge, distill, ...), summed, and its memory tool calls in any stage."""
    total = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "memory_tool_calls": 0}
    for stage, counts in (cost or {}).items():
        if stage != AGENT_STAGE:
            for key in ("calls", "input_tokens", "output_tokens"):
                total[key] += int(counts.get(key, 0))
        tools = counts.get("tool_calls") or {}
        total["memory_tool_calls"] += sum(int(tools.get(name, 0)) for name in MEMORY_TOOLS)
    return total
