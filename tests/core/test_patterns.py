"""first_class: a pattern behind a look-ahead for its first characters finds exactly what the pattern finds.

Generated classes: for patterns of every construct the look-ahead is built from (literals, ranges, categories,
groups, alternations, optional parts, word boundaries, lookbehinds, look-aheads, case folding with the letters
Python folds onto ASCII), the matches, spans and groups on generated lines, also inside pos / endpos windows, equal
the pattern's own. The rule tables' own patterns are checked line by line in tests/memory/screening and
tests/redaction.
"""

from __future__ import annotations

import random
import re

import pytest

from mtl_graph.core.patterns import first_class

PATTERNS = [
    (r"\bkey\b|secret", re.I),
    (r"(?<![\w.])\(env\)|^\s*set\b", re.I | re.M),
    (r"(?:^|[;&|])\s*rm\b", re.I | re.M),
    (r"[\u4e00-\u9fff]+删除", 0),
    (r"\b\d{2,}:\d+", 0),
    (r"(?=(?:api_?key|pwd|secret))", re.I),
    (r"(?:/private)?/(?:tmp|var/tmp)/\S*", 0),
    (r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b", 0),
    (r"(?P<name>pass(?:word)?)\s*[:=]\s*(?P<value>\S+)", re.I),
    (r"(a)\1b", re.I),
]
ALPHABET = ["key", "KEY", "\u212aey", "\u017fecret", "SECRET", "secret", " ", "\n", ";", "|", "(", ")", "env", "ENV",
            "x", ".", "rm", "RM", "set", "\t", "请删除", "删除", "12", "\u0661\u0662", ":", "3", "api_key", "PWD",
            "/tmp/", "/private/tmp/a", "deadbeef1", "cafe0123", "password", "=", "hunter2", "aab", "é", "ß", "(env)",
            " set", "/var/tmp/x", "12:34", " 99:1", "password=hunter2", " ; rm", "|rm"]


def lines(seed: int = 3, n: int = 400) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 14))) for _ in range(n)]


def _spans(pattern: re.Pattern[str], text: str, *window: int) -> list:
    return [(m.span(), m.groups()) for m in pattern.finditer(text, *window)]


@pytest.mark.parametrize("source, flags", PATTERNS)
def test_same_matches_on_generated_lines(source, flags):
    pattern = re.compile(source, flags)
    fast = first_class(pattern)
    assert fast is not pattern and fast.flags == pattern.flags
    rng = random.Random(source)
    found = 0
    for text in lines():
        expected = _spans(pattern, text)
        assert _spans(fast, text) == expected, text
        assert [m.group() for m in fast.finditer(text)] == [m.group() for m in pattern.finditer(text)]
        start = rng.randrange(len(text) + 1)
        end = rng.randrange(start, len(text) + 1)
        assert _spans(fast, text, start, end) == _spans(pattern, text, start, end), (text, start, end)
        assert fast.sub("<x>", text) == pattern.sub("<x>", text)
        found += bool(expected)
    assert found > 5  # the generated lines hold matches


@pytest.mark.parametrize("source", [r"a*", r"(?:x|)y?", r".foo", r"[^a]b", r"(?i)x", r"abc",
                                    r"(?<=a)", r"(?!a)b?"])
def test_patterns_it_cannot_bound_or_need_not_run_as_they_are(source):
    """Empty matches, any first character, negated classes, global flags, or a first character the engine already
    skips to: the pattern is returned unchanged."""
    compiled = re.compile(source)
    assert first_class(compiled) is compiled
