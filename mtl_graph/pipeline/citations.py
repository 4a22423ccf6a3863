"""Which memories a run used: the citations the memory header asks for ("Using Memory 2").

The agent's own words are read (each step's reasoning and the submission: the default agent's replies, a wrapped
agent's AI messages and the middleware's, which all become the trajectory's steps), never command output, so a
memory or a file that prints "Using Memory 1" cites nothing. Text is normalised first (NFKC, case folded,
invisible characters dropped), so fullwidth digits, odd spacing or markup do not hide a citation. A mention
counts unless its own clause declines the memory ("Memory 1 does not apply", "ignoring memory 3", "instead of
Memory 2"): a clause ends at . ; : ! ? a comma, a line break, "but" or "however".
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable

from mtl_graph.core.trajectory import Trajectory

_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
          "ten": 10, "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5}
_NUMBER = r"(?:\d{1,3}|" + "|".join(_WORDS) + r")"
_MENTION = re.compile(rf"\bmemor(?:y|ies)\s*(?:#|no\.?|number|n°)?\s*({_NUMBER}(?:\s*(?:,|and|&|/|or)\s*#?\s*{_NUMBER})*)\b")
_CLAUSE = re.compile(r"[.;:!?\n,]|\bbut\b|\bhowever\b|\bwhereas\b")
_DECLINE = re.compile(
    r"\b(?:not|never|don'?t|doesn'?t|didn'?t|won'?t|isn'?t|aren'?t|can'?t|cannot|without|ignor\w*|skip\w*|"
    r"irrelevant|unrelated|inapplicable|misleading|wrong|instead|rather than|disregard\w*|discard\w*|reject\w*)\b")
_INVISIBLE = re.compile(r"[\u00ad\u200b-\u200f\u2060-\u2064\ufeff*_`~]")


def normalized(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _INVISIBLE.sub("", text).replace("\u2019", "'")
    return re.sub(r"[ \t\u00a0]+", " ", text)


def cited_numbers(texts: Iterable[str]) -> set[int]:
    """Memory numbers the texts cite (1-based, as the prompt numbers them)."""
    cited: set[int] = set()
    for text in texts:
        text = normalized(text or "")
        for match in _MENTION.finditer(text):
            start = max((m.end() for m in _CLAUSE.finditer(text, 0, match.start())), default=0)
            end_match = _CLAUSE.search(text, match.end())
            clause = text[start: end_match.start() if end_match else len(text)]
            if _DECLINE.search(clause):
                continue
            for number in re.findall(_NUMBER, match.group(1)):
                cited.add(int(number) if number.isdigit() else _WORDS[number])
    return cited


def agent_text(trajectory: Trajectory) -> list[str]:
    """What the agent itself wrote in a run (reasoning before each action, and its submission)."""
    return [*(s.reasoning for s in trajectory.steps if s.reasoning), *([trajectory.submission] if
                                                                       trajectory.submission else [])]


def cited_ids(trajectory: Trajectory | None, shown: list[str]) -> list[str]:
    """The ids of the shown memories (in prompt order: Memory 1 is shown[0]) the run cited."""
    if trajectory is None or not shown:
        return []
    numbers = cited_numbers(agent_text(trajectory))
    return list(dict.fromkeys(shown[n - 1] for n in sorted(numbers) if 1 <= n <= len(shown)))
