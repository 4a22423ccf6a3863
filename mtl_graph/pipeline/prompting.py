"""The pipeline's prompts: its templates (mtl_graph/pipeline/prompts/) and the memory block shown to the agent."""

from __future__ import annotations

from functools import partial
from typing import Any

from mtl_graph.core.templates import render_template

prompt = partial(render_template, "mtl_graph.pipeline")
"""Render a prompt template shipped in mtl_graph/pipeline/prompts/."""


def memory_block(memories: list[Any], observation_chars: int = 300) -> str:
    """The block appended to the agent's system prompt: the header, then each memory fenced by a fresh token."""
    from mtl_graph.memory.fence import fence_memories

    fenced = fence_memories(memories, observation_chars=observation_chars)
    return prompt("memory_header", memories=fenced.text, boundary=fenced.boundary)
