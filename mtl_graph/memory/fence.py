"""Memories in a prompt as data: one block between markers its text cannot forge, every line of it quoted.

A memory is text written by a model from another run (or imported from a file), so it may contain anything,
including lines that look like the prompt's own structure ("# End of memories", "SYSTEM: ...", a closing
marker). Three things keep it data:

* a boundary token drawn fresh (``secrets.token_hex``) for every rendered block, named in the header and carried
  by the block's opening and closing markers; a memory written before the block existed cannot contain it, and a
  token that happens to occur in a memory is redrawn;
* every line of a memory's text starts with a quote bar, so no heading, role line or marker of a memory can start
  a line of the prompt (all Unicode line breaks count as lines). The only unquoted lines inside the block are the
  ``Memory N (type, outcome):`` headings the renderer writes, which therefore cannot be forged either;
* chat-template special tokens (``<|im_start|>``), memory markers and invisible control / bidi characters are
  defused inside the text, so they cannot act even mid-line;
* a quoted line that reads like the block's own structure (a ``Memory N ...`` heading, a memory marker with any
  token, a markdown heading such as the block's header, a role line such as ``System:`` or ``[assistant]``, an
  "end of memories") is shown after ``[memory text]``, so a memory cannot look like a further memory or like the
  end of the block to the model reading it. What reads like structure is decided on the line as a reader sees
  it: compatibility forms folded (NFKC: fullwidth letters and digits), case folded, invisible format characters
  (zero-width, bidi marks) dropped, and leading decoration (spaces, quote bars, bullets, emphasis) skipped. Marking
  a harmless line costs a few characters, so the forms are broad.

The token is on the block's two markers only, not on every memory's: with every line quoted it adds no protection
per memory, and each copy of 16 hex digits costs ~15 tokens (the top-3 insight block went from 644 to 531 word
pieces in `make bench`, against a 600 budget).
"""

from __future__ import annotations

import re
import secrets
import unicodedata
from dataclasses import dataclass
from typing import Callable, Sequence

from mtl_graph.memory.base import Memory

QUOTE = "│ "
"""Prefix of every line of memory text (box-drawing bar: not markdown, not a role, not a heading)."""
TOKEN_BYTES = 8
"""Random bytes in a boundary token (16 hex characters)."""

_SPECIAL_TOKEN = re.compile(r"<\s*\|")
_SPECIAL_TOKEN_END = re.compile(r"\|\s*>")
_MARKER = re.compile(r"<\s*(/?)\s*(memor)", re.IGNORECASE)  # <memory-..., </memories...
# C0/C1 controls (tab kept), and the bidi overrides / isolates that can make text read differently than it is.
INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")

MARK = "[memory text] "
"""Shown before a quoted line that reads like the block's structure (the headers say so)."""
_DECORATION = re.compile(r"^[\W_]*?(?=[\w#<\[(]|$)")  # spaces, bars, bullets, emphasis, quotes before the first word
_LIST_NUMBER = re.compile(r"^\d{1,3}[.)]\s+")  # "3. Human: ..." is a role line in a numbered list
_ROLES = ("system", "user", "assistant", "developer", "human", "ai", "bot", "model", "tool", "function",
          "instruction", "instructions", "admin", "operator")
_STRUCTURE = re.compile(r"""(?x)
    \#                                         # a markdown heading (the block's header is one)
  | [<\[(]?\s*/?\s*memor                       # Memory N (...):, Memories ..., <memory-...>, </memory-...>, [memory]
  | end\b.{0,20}\bmemor                        # END OF MEMORIES, end memory block
  | [<\[(]?\s*/?\s*(?:""" + "|".join(_ROLES) + r""")\b\s*(?:[>\])]\s*)?[:>\]|)]   # System:, [assistant], <user>
""")


def reads_as_structure(line: str) -> bool:
    """Whether a line of memory text reads like the block's structure or a role line (see the module docstring)."""
    seen = "".join(c for c in unicodedata.normalize("NFKC", line) if unicodedata.category(c) != "Cf").casefold()
    seen = _LIST_NUMBER.sub("", _DECORATION.sub("", seen, count=1), count=1)
    return bool(_STRUCTURE.match(_DECORATION.sub("", seen, count=1)))


@dataclass(frozen=True)
class FencedMemories:
    """Rendered memories and the boundary token their markers carry (the header must name it)."""

    text: str
    boundary: str


def _defuse(line: str) -> str:
    line = INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
    line = _SPECIAL_TOKEN.sub("‹|", line)
    line = _SPECIAL_TOKEN_END.sub("|›", line)
    return _MARKER.sub(lambda m: f"‹{m.group(1)}{m.group(2)}", line)


def quote(text: str, prefix: str = QUOTE) -> str:
    """Every line of text prefixed with the quote bar (or another prefix: markdown's "> " in exported files) and
    defused, a line that reads like the block's structure marked (empty text gives one quoted empty line)."""
    return "\n".join(prefix + (MARK if reads_as_structure(line) else "") + _defuse(line)
                      for line in (text.splitlines() or [""]))


def open_marker(boundary: str) -> str:
    return f"<memory-{boundary}>"


def close_marker(boundary: str) -> str:
    return f"</memory-{boundary}>"


def heading(index: int, memory: Memory) -> str:
    """The unquoted line that starts memory number index (type and outcome are enums, never memory text)."""
    return f"Memory {index} ({memory.type}, {memory.outcome.value}):"


def new_boundary() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def fence_memories(memories: Sequence[Memory], *, start: int = 1, observation_chars: int = 300,
                   boundary_factory: Callable[[], str] = new_boundary) -> FencedMemories:
    """Numbered memories between the block's markers (a fresh boundary token), their text quoted line by line.

    Each memory's text is its format's label and body (declared with the format, mtl_graph/memory/formats/)."""
    bodies = [f"{m.label()}\n{m.body(observation_chars)}" for m in memories]
    lowered = [body.lower() for body in bodies]
    for _ in range(100):  # a clash happens only by chance (2**-64) or with a factory that guesses a memory's text
        boundary = boundary_factory()
        if boundary and not any(boundary.lower() in body for body in lowered):
            break
    else:
        raise RuntimeError("could not draw a boundary token absent from the memories")
    blocks = [f"{heading(i, m)}\n{quote(body)}" for i, (m, body) in enumerate(zip(memories, bodies), start)]
    return FencedMemories("\n".join([open_marker(boundary), *blocks, close_marker(boundary)]), boundary)
