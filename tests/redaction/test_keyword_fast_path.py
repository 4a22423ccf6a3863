"""detect-secrets' keyword detector, tried only where a denylisted name starts, finds exactly what its regexes find
when tried at every position (`finditer`, the plugin's own way): the same matches, groups and findings, on every
line of the generated secret corpus, the look-alikes, generated agent logs and hostile variants (case-folded
letters, non-ASCII names, overlapping names such as `key_password`). No timing here: benchmarks/ingest_speed.py.
"""

from __future__ import annotations

import random

from helpers.agent_log import agent_log
from test_redaction_fast_path import corpus_texts, hostile_variants

from mtl_graph.redaction import detectors


def reference_matches(line: str) -> list[tuple[str, tuple[int, int], tuple[str | None, ...]]]:
    return [(regex.pattern, m.span(), m.groups()) for regex in detectors._KEYWORD_REGEXES for m in regex.finditer(line)]


def fast_matches(line: str) -> list[tuple[str, tuple[int, int], tuple[str | None, ...]]]:
    starts = [m.start() for m in detectors._NAME_STARTS.finditer(line)]
    if not starts:
        return []
    return [(regex.pattern, m.span(), m.groups()) for regex in detectors._KEYWORD_REGEXES
            for m in detectors._matches(regex, line, starts)]


def reference_findings(line: str) -> list[detectors.Finding]:
    """_keyword_findings as it was: every regex's finditer over the whole line."""
    saved = detectors._matches, detectors._NAME_STARTS
    try:
        detectors._matches = lambda regex, line, starts: regex.finditer(line)
        detectors._NAME_STARTS = detectors.re.compile("(?=)")  # every position is a start
        return list(detectors._keyword_findings(line))
    finally:
        detectors._matches, detectors._NAME_STARTS = saved


def lines() -> list[str]:
    rng = random.Random(11)
    texts = corpus_texts(range(2)) + [agent_log(seed, 20_000) for seed in range(2)]
    texts += [v for text in corpus_texts(range(1))[::7] for v in hostile_variants(text, rng)]
    texts += ['key_password = "hunter2-xyz"', 'api_key_pass: "s3cr3t-value"', 'db_pass="a"; db_password="b"',
              "PASSWORD='x' PASSWORD='y' secret = 'z'", '"abc123" == user_password', 'ſecret = "oijwe98fu2"',
              'my_api_\u212aey => "ab12cd34"', 'contraseña: "pass-1234"', "Password ‘x’", ""]
    return [line for text in texts for line in text.split("\n")]


def test_same_matches_and_findings_on_every_line():
    named = 0
    for line in lines():
        assert fast_matches(line) == reference_matches(line), line[:200]
        assert list(detectors._keyword_findings(line)) == reference_findings(line), line[:200]
        named += bool(detectors._DENYLIST.search(line))
    assert named > 200  # the corpus holds many lines the regexes have to read


def test_overlapping_names_each_start_a_try():
    line = 'key_password = "hunter2-xyz"'
    assert [m.start() for m in detectors._NAME_STARTS.finditer(line)] == [0, 4]
    assert fast_matches(line) == reference_matches(line) != []


def test_every_name_opening_regex_is_recognised():
    """The regexes the plugin opens with its name group are tried only at names; the others at every position."""
    opening = [r for r, opens in detectors._OPENS_WITH_NAME.items() if opens]
    assert len(opening) == 4 and len(detectors._KEYWORD_REGEXES) == 5
