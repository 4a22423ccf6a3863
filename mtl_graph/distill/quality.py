"""A quality gate for model-written text that becomes a query or a memory: echoes, placeholders, no advice.

Small or confused models answer a distillation prompt by repeating it ("1 to 3 sentences: what went wrong..."),
by copying the task, by filling a template placeholder, or with filler that passes the schema. Such text is valid
JSON and would be retrieved later as if it were experience, so it is rejected with a reason instead. The checks
are lexical and conservative: each names what it found, and ordinary advice passes.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

from pydantic import BaseModel, ConfigDict, Field

_WORD = re.compile(r"[a-z0-9']+")
# Our templates' own variables, Jinja-style fields, and "fill in here" markers; a shell `$PATH` is not one.
_PLACEHOLDER = re.compile(
    r"\$\{?(?:trajectory|outcome|verdict_reason|instruction|task|memories|schema|error|leaks)\b\}?|"
    r"\{\{[^{}\n]{0,40}\}\}|<\s*(?:insert|your|fill|placeholder)\b[^>\n]{0,40}>|"
    r"\[\s*(?:insert|your|fill|placeholder)\b[^\]\n]{0,40}\]|\blorem ipsum\b",
    re.I,
)
_STOP = frozenset(
    "a an the and or but if then else of to in on at by for with from as is are was were be been being this that "
    "these those it its they them their there here do does did done not no so such than too very can could should "
    "would will may might must i you we he she one all any each every some more most other into about over after "
    "before when while where which what who how why also just only own same".split()
)


class QualityConfig(BaseModel):
    """Thresholds of the quality gate."""

    model_config = ConfigDict(extra="forbid")

    ngram: int = Field(default=4, ge=2, le=8)
    """Word n-gram length used to detect echoes."""
    max_echo: float = Field(default=0.5, gt=0, le=1)
    """Share of a text's n-grams found in a prompt or the task above which the text is an echo."""
    min_content_words: int = Field(default=4, ge=1)
    """Distinct non-stop-words a text needs to carry any advice."""
    max_repeat: float = Field(default=0.4, gt=0, le=1)
    """Share of all words one word may take before the text counts as degenerate repetition."""


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def echo_share(text: str, source: str, n: int = 4) -> float:
    """Share of text's word n-grams that also occur in source (0 when text is shorter than n words)."""
    grams = _ngrams(_words(text), n)
    if not grams:
        return 0.0
    return len(grams & _ngrams(_words(source), n)) / len(grams)


def junk_reasons(text: str, *, prompts: Iterable[str] = (), task: str = "",
                 config: QualityConfig | None = None) -> list[str]:
    """Why text is junk (empty list: it passes). prompts are the instructions the model saw; task the task text."""
    cfg = config or QualityConfig()
    reasons = []
    placeholder = _PLACEHOLDER.search(text)
    if placeholder:
        reasons.append(f"contains template placeholder text {placeholder.group(0)!r}")
    for prompt in prompts:
        share = echo_share(text, prompt, cfg.ngram)
        if share > cfg.max_echo:
            reasons.append(f"repeats the prompt's own instructions ({share:.0%} of its phrases)")
            break
    if task:
        share = echo_share(text, task, cfg.ngram)
        if share > cfg.max_echo:
            reasons.append(f"copies the task text ({share:.0%} of its phrases) instead of a lesson")
    words = _words(text)
    content = {w for w in words if w not in _STOP and not w.isdigit()}
    if len(content) < cfg.min_content_words:
        reasons.append(f"no actionable advice ({len(content)} content words)")
    elif words:
        word, count = Counter(words).most_common(1)[0]
        if len(words) >= 10 and count / len(words) > cfg.max_repeat:
            reasons.append(f"degenerate repetition ({word!r} is {count / len(words):.0%} of the words)")
    return reasons


def plan_problems(plan: str, prompt: str, config: QualityConfig | None = None) -> list[str]:
    """Why a HyDE plan is no use as a query: empty, an echo of the plan prompt, or placeholder text."""
    if not plan.strip():
        return ["empty plan"]
    cfg = config or QualityConfig()
    share = echo_share(plan, prompt, cfg.ngram)
    problems = [f"repeats the plan prompt ({share:.0%} of its phrases)"] if share > cfg.max_echo else []
    placeholder = _PLACEHOLDER.search(plan)
    if placeholder:
        problems.append(f"contains template placeholder text {placeholder.group(0)!r}")
    return problems
