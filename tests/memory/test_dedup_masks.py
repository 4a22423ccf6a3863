"""Dedup's normalisation with the mask pre-scan (memory/dedup.py) gives the text every mask run in turn gives.

The pre-scan skips a mask when its entry in `_NEEDS_ASCII` / `_NEEDS_UTF8` finds nothing, and asks again after a
mask changed the text. Checked here: each entry finds something wherever its mask does (the property the skip
rests on), on generated texts of every kind of noise the masks erase, glued together and to non-ASCII letters,
digits and spaces, ASCII and not, short and long; the normalised texts equal the reference's; the same for the
content of every fixture run's memory; and the whitespace collapse reads the same whitespace as `\\s`.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest

from mtl_graph.distill.distillers import distill
from mtl_graph.importers import load_many
from mtl_graph.memory import dedup
from mtl_graph.memory.base import MemoryType
from mtl_graph.memory.dedup import _NOISE, _mask_scan, normalize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = [FIXTURES / "agent_logs", FIXTURES / "logs" / "mini_swe_agent", FIXTURES / "logs" / "swe_agent"]

pytestmark = pytest.mark.skipif(dedup.hyperscan is None, reason="the pre-scan needs Hyperscan")

PIECES = [
    "3f2a9c1e-7b4d-4e8f-9a0b-1c2d3e4f5a6b", "3F2A9C1E-7B4D-4E8F-9A0B-1C2D3E4F5A6B", "2026-12-07T17:03:49Z",
    "2026-12-07 17:03", "2026-12-07t17:03:49.123+01:00", "17:03:49", "7:03:49,5", "0x7ffdeadbeef", "0X1F",
    "deadbeef12", "abcdef0", "1234567", "cafe", "12ms", "3.5 s", "4\x1cseconds", "2\u2003min", "10\nminutes", "5µs",
    "7 µs", "9 us", "1 ns", "3 secs", "1 sec", "2 mins", "\u0663\u0664 s", "\u0661\u0662:\u0663\u0664:\u0665\u0666",
    "/tmp/pytest-of-root/x", "/private/var/folders/ab/T/y", "/var/tmp/z", "tmp/", "/tmpx", " ", "\t", "\n", "\x85",
    "\u00a0", "é", "ß", "\u212a", "日本", "<", ">", "_", "-", ":", ".", ",", "a", "z", "e", "f", "0", "9", "x", "s",
    "ms", "min", "test", "result", "ok", "\ud800",
]


def texts(seed: int, n: int, size: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        pieces = [rng.choice(PIECES) for _ in range(rng.randrange(1, size))]
        if rng.random() < 0.5:  # ASCII only: the other database
            pieces = [p for p in pieces if p.isascii()]
        out.append("".join(pieces))
    return out


def test_each_entry_finds_something_wherever_its_mask_does():
    scan = _mask_scan()
    hits = [0] * len(_NOISE)
    for text in texts(1, 3000, 40):
        text = text.casefold()
        possible = scan.possible(text)
        for mask, (pattern, _, _) in enumerate(_NOISE):
            if pattern.search(text):
                assert mask in possible, (mask, text)
                hits[mask] += 1
    assert min(hits) > 20  # every mask matched in the generated texts


@pytest.mark.parametrize("seed, size", [(2, 12), (3, 60), (4, 400)])
def test_normalised_texts_equal_the_reference(seed, size):
    skipped = 0
    for text in texts(seed, 600, size):
        assert normalize(text) == normalize(text, fast=False), text
        if len(text) >= dedup._PRESCAN_MIN:
            skipped += len(_NOISE) - len(_mask_scan().possible(text.casefold()))
    assert size < 60 or skipped > 0  # long texts do skip masks


def test_fixture_memories_normalise_as_the_reference():
    strings: list[str] = []

    def walk(value):
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    loaded, _ = load_many(RUNS)
    for item in loaded:
        for memory in distill(item.trajectory, [MemoryType.TRAJECTORY]).memories:
            walk(memory.content_fields())
    assert sum(len(s) >= dedup._PRESCAN_MIN for s in strings) > 5
    for text in strings:
        assert normalize(text) == normalize(text, fast=False)


def test_whitespace_collapse_reads_the_whitespace_of_backslash_s():
    space = re.compile(r"\s")
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        assert bool(space.match(char)) == char.isspace() == (char.split() == []), hex(code)


def test_bad_input():
    for text in ["", " ", "\n\n", "\ud800" * 300, "\x00" * 300, "0" * 10_000, "a\u0301" * 200]:
        assert normalize(text) == normalize(text, fast=False)
