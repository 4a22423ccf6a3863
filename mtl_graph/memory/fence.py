"""Memories in a prompt as data: each one inside markers its own text cannot forge, every line of it quoted.

A memory is text written by a model from another run (or imported from a file), so it may contain anything,
including lines that look like the prompt's own structure ("# End of memories", "SYSTEM: ...", a closing
marker). Three things keep it data:

* a boundary token drawn fresh (``secrets.token_hex``) for every rendered block and named in the header; a memory
  written before the block existed cannot contain it, and a token that happens to occur in a memory is redrawn;
* every line of a memory's text starts with a quote bar, so no heading, role line or marker of a memory can
  start a line of the prompt (all Unicode line breaks count as lines);
* chat-template special tokens (``<|im_start|>``), memory markers and invisible control / bidi characters are
  defused inside the text, so they cannot act even mid-line.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Callable, Sequence

from mtl_graph.memory.models import Memory

QUOTE = "│ "
"""Prefix of every line of memory text (box-drawing bar: not markdown, not a role, not a heading)."""
TOKEN_BYTES = 8
"""Random bytes in a boundary token (16 hex characters)."""

_SPECIAL_TOKEN = re.compile(r"<\s*\|")
_SPECIAL_TOKEN_END = re.compile(r"\|\s*>")
_MARKER = re.compile(r"<\s*(/?)\s*(memory)", re.IGNORECASE)
# C0/C1 controls (tab kept), and the bidi overrides / isolates that can make text read differently than it is.
_INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class FencedMemories:
    """Rendered memories and the boundary token their markers carry (the header must name it)."""

    text: str
    boundary: str


def _defuse(line: str) -> str:
    line = _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
    line = _SPECIAL_TOKEN.sub("‹|", line)
    line = _SPECIAL_TOKEN_END.sub("|›", line)
    return _MARKER.sub(lambda m: f"‹{m.group(1)}{m.group(2)}", line)


def quote(text: str) -> str:
    """Every line of text prefixed with the quote bar and defused (empty text gives one quoted empty line)."""
    return "\n".join(QUOTE + _defuse(line) for line in (text.splitlines() or [""]))


def open_marker(boundary: str, index: int, memory: Memory) -> str:
    return f'<memory-{boundary} n="{index}" type="{memory.type}" outcome="{memory.outcome.value}">'


def close_marker(boundary: str, index: int) -> str:
    return f'</memory-{boundary} n="{index}">'


def new_boundary() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def fence_memories(memories: Sequence[Memory], *, start: int = 1, observation_chars: int = 300,
                   boundary_factory: Callable[[], str] = new_boundary) -> FencedMemories:
    """Numbered memories, each between markers carrying a fresh boundary token, their text quoted line by line."""
    bodies = [f"{m.label()}\n{m.body(observation_chars)}" for m in memories]
    lowered = [body.lower() for body in bodies]
    for _ in range(100):  # a clash happens only by chance (2**-64) or with a factory that guesses a memory's text
        boundary = boundary_factory()
        if boundary and not any(boundary.lower() in body for body in lowered):
            break
    else:
        raise RuntimeError("could not draw a boundary token absent from the memories")
    blocks = [f"{open_marker(boundary, i, m)}\n{quote(body)}\n{close_marker(boundary, i)}"
              for i, (m, body) in enumerate(zip(memories, bodies), start)]
    return FencedMemories("\n\n".join(blocks), boundary)
