"""One combined pre-scan that tells each secret rule which lines it needs to look at.

Every rule (`Rule`) comes with triggers: patterns that match, on the same line, wherever the rule can find a secret
(a necessary condition, not a detection). All triggers are compiled into one Hyperscan database and run over the
text in a single pass; each rule then runs only on the lines its triggers fired on (plus `after` lines of context),
so the costly work (detect-secrets' plugins, the assignment rules, entropy checks) touches a few percent of a log.
Without Hyperscan (a platform it has no wheel for) the triggers run one by one with `re`: slower, same lines.

Triggers are written for bytes and must over-approximate the rule they guard. The text is scanned as one byte per
character (Latin-1; any other character becomes the byte 0x80), so offsets need no mapping:
- where a rule's class holds Unicode letters, digits or spaces (`\\w`, `\\d`, `\\s` on `str`), the trigger's class
  takes every non-ASCII byte too (`W`, `D` and the negated `SPACE` below);
- case-insensitive triggers fold ASCII only; the few non-ASCII letters Python's `re.IGNORECASE` folds onto ASCII
  (`ſ`, `K`, `İ`, `ı`) are scanned as those ASCII letters;
- a trigger never spans lines: classes exclude the line feed and `$` (multi-line) marks a line end.
The guarantee that the fast path redacts exactly what the full path does is tested on the generated corpus.
"""

from __future__ import annotations

import codecs
import re
import threading
from collections import defaultdict
from functools import lru_cache
from typing import Callable, Iterator, NamedTuple, Sequence

from mtl_graph.core.patterns import first_class

try:
    import hyperscan
except ImportError:  # pragma: no cover - platforms without a wheel use the `re` engine
    hyperscan = None


class Finding(NamedTuple):
    """One secret: its span in the scanned text, its kind, and how much to trust the rule that found it."""

    start: int
    end: int
    kind: str
    priority: int


PREFIX, VENDOR, CONTEXT, KEYWORD, ENTROPY = 4, 3, 2, 1, 0
"""Finding priorities: when spans overlap, the most specific rule names the kind (a vendor prefix rule beats a
detect-secrets plugin anchored on a keyword, which beats an assignment rule, ...)."""

Span = tuple[int, int]
Scan = Callable[[str, Sequence[Span]], Iterator[Finding]]

W = r"0-9A-Za-z_\x80-\xff"
"""Inside a class: a character `\\w` matches on `str` (any non-ASCII byte may belong to one)."""
D = r"0-9\x80-\xff"
"""Inside a class: a character `\\d` matches on `str`."""
SPACE = r"\t\n\v\f\r "
"""Inside a negated class: the ASCII spaces (a negated `\\s` keeps every non-ASCII byte)."""
SECRET_WORD = r"(?:pass|passwd|password|passphrase|pwd|secret|token|credentials?|key|auth|dockerconfigjson)"
"""Every name `is_secret_name` accepts ends with one of these words (case aside: DB_PASSWORD, apiKey, _authToken)
followed by NAME_TAIL: the characters of a name that are not ASCII letters or digits."""
NAME_TAIL = r"[._\x80-\xff-]*"
SECRET_NAME = rf"{SECRET_WORD}(?:{NAME_TAIL}(?:base|value|b64|base64|hex|raw))?{NAME_TAIL}"
"""The end of a secret name, with the storage suffix `is_secret_name` skips (SECRET_KEY_BASE); caseless."""
SECRET_NAME_END = rf"{SECRET_WORD}(?:[^A-Za-z0-9\n]|$)"
"""A secret word ending a name's word, whatever follows it (caseless)."""
_FOLD = {"\u017f": "s", "\u212a": "k", "\u0130": "i", "\u0131": "i"}


def _one_byte(error: UnicodeEncodeError) -> tuple[str, int]:
    # Characters beyond Latin-1 become one byte each, so byte offsets are character offsets: a letter that
    # IGNORECASE folds onto ASCII becomes that letter, any other one the byte 0x80 (every class that may hold a
    # non-ASCII character holds 0x80-0xff).
    chars = error.object[error.start:error.end]
    return "".join(_FOLD.get(c, "\x80") for c in chars), error.end


codecs.register_error("mtl_prescan_one_byte", _one_byte)


class Trigger(NamedTuple):
    """A pattern (bytes dialect, see the module docstring) that fires on every line where its rule can match."""

    pattern: str
    caseless: bool = False


class Rule(NamedTuple):
    """A secret rule and the lines it needs: `scan(text, spans)` yields findings inside the given spans."""

    name: str
    scan: Scan
    triggers: tuple[Trigger, ...] = ()
    """All of them must fire on one line for the rule to look at it; none: the rule always scans the whole text."""
    after: int = 0
    """Lines after a trigger line that a match may reach (a YAML value on the line below its name)."""
    whole: bool = False
    """Scan the whole text once any trigger fires (blocks of unbounded length: PEM keys)."""


def trigger(pattern: str, caseless: bool = False) -> tuple[Trigger, ...]:
    """A one-trigger tuple for `Rule.triggers`."""
    return (Trigger(pattern, caseless),)


def finditer(pattern: re.Pattern[str], text: str, spans: Sequence[Span]) -> Iterator[re.Match[str]]:
    """pattern's matches inside spans of text (lookbehinds and `^` still see the text around them)."""
    searched = _searched(pattern)
    for start, end in spans:
        yield from searched.finditer(text, start, end)


@lru_cache(maxsize=1024)
def _searched(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """The pattern behind a look-ahead for its first characters (core/patterns.py): the same matches, sooner."""
    return first_class(pattern)


def lines(text: str, spans: Sequence[Span]) -> Iterator[tuple[int, str]]:
    """(offset, line) for every line inside spans; spans start at line starts."""
    for start, end in spans:
        offset = start
        for line in text[start:end].split("\n"):
            if offset < end or offset == start:
                yield offset, line
            offset += len(line) + 1


class Prescan:
    """The compiled triggers of a rule set; `spans(text)` gives each rule's spans of text to scan."""

    def __init__(self, rules: Sequence[Rule], engine: str = "auto") -> None:
        self.rules = list(rules)
        patterns = sorted({t for rule in self.rules for t in rule.triggers})
        ids = {t: i for i, t in enumerate(patterns)}  # rules sharing a trigger share its matches
        self._rules_of: list[list[int]] = [[] for _ in patterns]
        self._needs: dict[int, list[int]] = {}  # rule -> its pattern ids
        for r, rule in enumerate(self.rules):
            self._needs[r] = sorted({ids[t] for t in rule.triggers})
            for pid in self._needs[r]:
                self._rules_of[pid].append(r)
        self._always = [r for r, rule in enumerate(self.rules) if not rule.triggers]
        self.engine = ("hyperscan" if hyperscan is not None else "re") if engine == "auto" else engine
        if self.engine not in ("hyperscan", "re"):
            raise ValueError(f"pre-scan engine {engine!r} is not one of auto, hyperscan, re")
        if self.engine == "hyperscan" and hyperscan is None:
            raise ValueError("pre-scan engine 'hyperscan' is not installed (pip install hyperscan), use 're'")
        if self.engine == "hyperscan":
            self._db = _hyperscan_db(tuple(patterns))
            self._local = threading.local()  # a scan needs scratch space no other thread is using
        else:
            self._compiled = [re.compile(p.pattern.encode(), re.M | (re.I if p.caseless else 0)) for p in patterns]

    def _matches(self, data: bytes) -> list[tuple[int, int]]:
        """(end offset, pattern id) of every trigger match, sorted."""
        found: list[tuple[int, int]] = []
        if self.engine == "hyperscan":
            def on_match(pid: int, start: int, end: int, flags: int, context: object) -> None:
                found.append((end, pid))
            scratch = getattr(self._local, "scratch", None)
            if scratch is None:
                scratch = self._local.scratch = hyperscan.Scratch(self._db)
            self._db.scan(data, match_event_handler=on_match, scratch=scratch)
        else:
            for pid, pattern in enumerate(self._compiled):
                found.extend((m.end(), pid) for m in pattern.finditer(data))
        found.sort()
        return found

    def spans(self, text: str) -> dict[int, list[Span]]:
        """Rule index -> the merged spans of whole lines it must scan, for the rules with any; rules without
        triggers get the whole text."""
        whole = [(0, len(text))]
        out: dict[int, list[Span]] = {r: whole for r in self._always}
        data = text.encode("latin-1", "mtl_prescan_one_byte")
        fired: dict[int, set[int]] = defaultdict(set)  # pattern id -> starts of the lines it fired on
        ends: dict[int, int] = {}  # line start -> its end (line feed included)
        line_start = line_end = -1
        for end, pid in self._matches(data):
            offset = max(end - 1, 0)  # a line feed a trigger ends on belongs to the line it ends
            if offset >= line_end:
                line_start = data.rfind(b"\n", 0, offset) + 1
                line_end = ends[line_start] = data.find(b"\n", offset) + 1 or len(data)
            fired[pid].add(line_start)
        byte_spans: dict[int, list[Span]] = {}
        for r in sorted({r for pid in fired for r in self._rules_of[pid]}):
            needs = self._needs[r]
            wanted = fired[needs[0]] if len(needs) == 1 else set.intersection(*(fired.get(p, set()) for p in needs))
            if self.rules[r].whole and wanted:
                out[r] = whole
            elif wanted:
                byte_spans[r] = _merge_lines(data, ends, sorted(wanted), self.rules[r].after)
        out.update(byte_spans)  # one byte per character: the same offsets
        return out


def _merge_lines(data: bytes, ends: dict[int, int], starts: list[int], after: int) -> list[Span]:
    """Byte spans of the lines at starts (ends: where each ends), each with `after` more lines, merged where they
    touch."""
    merged: list[Span] = []
    for start in starts:
        end = ends[start]
        for _ in range(after):
            end = data.find(b"\n", end) + 1 or len(data)
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


@lru_cache(maxsize=8)
def _hyperscan_db(patterns: tuple[Trigger, ...]) -> "hyperscan.Database":
    db = hyperscan.Database()
    flags = [hyperscan.HS_FLAG_MULTILINE | (hyperscan.HS_FLAG_CASELESS if p.caseless else 0) for p in patterns]
    db.compile(expressions=[p.pattern.encode() for p in patterns], ids=list(range(len(patterns))),
               elements=len(patterns), flags=flags)
    return db
