"""Field types for the drafts a distilling model answers: bounded text with sentence and paragraph checks."""

from __future__ import annotations

import re
from typing import Annotated, Any, Callable

from pydantic import AfterValidator, ConfigDict, Field

DRAFT_CONFIG = ConfigDict(str_strip_whitespace=True, extra="ignore")
"""Drafts strip their text and ignore fields a model adds."""
_ABBREVIATIONS = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf|approx)\.", re.I)


def count_sentences(text: str) -> int:
    text = _ABBREVIATIONS.sub("abbr", text.strip())
    return len([s for s in re.split(r"(?<=[.!?])\s+(?=\S)", text) if s.strip()])


def at_most(n: int) -> Callable[[str], str]:
    def check(text: str) -> str:
        if count_sentences(text) > n:
            raise ValueError(f"must be at most {n} sentence{'s' if n > 1 else ''} (got {count_sentences(text)})")
        return text

    return check


def one_paragraph(text: str) -> str:
    if re.search(r"\n\s*\n", text.strip()):
        raise ValueError("must be one paragraph (no blank lines)")
    return text


def text(lo: int, hi: int, *checks: Callable[[str], str]) -> Any:
    """A str of lo to hi characters passing every check."""
    return Annotated[str, Field(min_length=lo, max_length=hi), *(AfterValidator(c) for c in checks)]
