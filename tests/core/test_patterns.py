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

from mtl_graph.core.patterns import _anchored_split, _top_level_alternatives, first_class, line_search

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


LINE_PATTERNS = [  # alternatives that open with `^` among others, under the flags the rules use
    (r"^\s*set\b|(?<![\w.])\(env\)|^#+\s*instruction", re.I | re.M),
    (r"key|^\s*[\[#]+\s*(?:system|admin)\b|\bsecret\b", re.I | re.M),
    (r"^rm\b|;\s*rm\b|^\s*env$", re.M),
    (r"[|^]x|^[]|]y|(?:^|;)z|\^w|^(?:a|b)c", re.I | re.M),  # `|` and `^` inside classes, groups and escapes
    (r"^key|^pwd", re.I),  # the parser factors the `^` out: searched as it is
    (r"(a)|^\1b", re.I),  # a group reference ties the alternatives: searched as it is
]
LINE_ALPHABET = [a for a in ALPHABET if "\n" not in a] + ["#", "##", "[", "]", "y", "z", "w", "^w", "ac", "bc",
                                                           "instruction", "admin", "SYSTEM", "|x", "^x", "\\"]


@pytest.mark.parametrize("source, flags", LINE_PATTERNS)
def test_line_search_answers_as_search_on_generated_lines(source, flags):
    pattern = re.compile(source, flags)
    found = line_search(pattern)
    rng = random.Random(source)
    hits = 0
    for _ in range(3000):
        line = "".join(rng.choice(LINE_ALPHABET) for _ in range(rng.randrange(0, 10)))
        expected = pattern.search(line) is not None
        assert found(line) == expected, line
        hits += expected
    assert 50 < hits < 2950  # both answers are generated


def test_the_split_is_the_parsers_own():
    assert _top_level_alternatives(r"a|(b|c)|[|]|\||[]|]|[^]|]|^d") == ["a", "(b|c)", "[|]", "\\|", "[]|]", "[^]|]", "^d"]
    start, rest = _anchored_split(re.compile(r"^\s*set|(?<!x)env|^#", re.M))
    assert (start.pattern, rest.pattern) == (r"^\s*set|^#", r"(?<!x)env")
    for source in [r"^a|^\s*b",  # every alternative anchored: the parser factors the `^` out
                   r"^key|^pwd", r"(a)|^\1b", r"(?P<n>a)|^(?P=n)", r"abc", r"a|b", r"(?i)^a|b", r"(?x)^a | b"]:
        assert _anchored_split(re.compile(source)) is None, source
