"""One pass for the triggers of a whole rule table: which lines each rule has to look at.

A rule (rules.py) finds its candidate lines with its own trigger, one `finditer` over the lower-cased text per
rule: some 70 passes over every text, most of the screening time before a full pattern runs. Here the triggers
that can be moved are compiled into one Hyperscan database and run in a single pass; a rule then gets the lines
its trigger fired on and looks at exactly the lines its own `finditer` would have led it to, in the same order,
so its verdict is the same (tests/memory/screening/test_screening_fast_path.py compares both paths, rule by rule).

Which triggers move, and how each line is read, is what makes the lines the same:
- the trigger cannot match a line feed and cannot match the empty string (checked on its parsed form): each of its
  matches lies inside one line, so "a line where it matches somewhere" (Hyperscan reports every match) and "a line
  where `finditer` starts a match" (leftmost, non-overlapping) are the same lines;
- the trigger is ASCII, has no flags, is made of literals, classes, repeats, alternation, groups and word
  boundaries, and Hyperscan compiles it. Anything else (lookarounds, anchors, `\\s`, which crosses lines) keeps
  its own `finditer`;
- Hyperscan reads the ASCII lines (one byte per character; there `\\w`, `\\d` and `\\b` mean the same in both
  engines); a line holding any other character is searched with the trigger itself.
The `also` substrings of the rules (far more tests than distinct words) are found in the same way, all in one pass
over the text's UTF-8 bytes, which is exact for any text.
Without a Hyperscan wheel every rule keeps its own scan.
"""

from __future__ import annotations

import bisect
import codecs
import functools
import re
import threading
from typing import Any, Sequence

try:
    import hyperscan
except ImportError:  # pragma: no cover - platforms without a wheel scan per rule
    hyperscan = None

from mtl_graph.core.patterns import alternatives, parse, regex_constants as _c

_LINE_FEED = 10
_SAFE_CATEGORIES = {_c.CATEGORY_DIGIT, _c.CATEGORY_WORD}  # neither holds a line feed
_SAFE_AT = {_c.AT_BOUNDARY, _c.AT_NON_BOUNDARY}


def _class_safe(items: list[tuple[Any, Any]]) -> bool:
    """A character class without negation that cannot hold a line feed."""
    for op, arg in items:
        if op is _c.LITERAL:
            if arg == _LINE_FEED:
                return False
        elif op is _c.RANGE:
            if arg[0] <= _LINE_FEED <= arg[1]:
                return False
        elif op is _c.CATEGORY:
            if arg not in _SAFE_CATEGORIES:
                return False
        else:  # NEGATE and anything unforeseen
            return False
    return True


def _safe(parsed: Any) -> bool:
    """Every node is one Hyperscan reads as Python does and none can match a line feed."""
    for op, arg in parsed:
        if op is _c.LITERAL:
            if arg == _LINE_FEED:
                return False
        elif op is _c.IN:
            if not _class_safe(arg):
                return False
        elif op is _c.AT:
            if arg not in _SAFE_AT:
                return False
        elif op is _c.BRANCH:
            if not all(_safe(branch) for branch in arg[1]):
                return False
        elif op is _c.SUBPATTERN:
            group, add_flags, del_flags, sub = arg
            if add_flags or del_flags or not _safe(sub):
                return False
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
            if not _safe(arg[2]):
                return False
        else:  # ANY (.), NOT_LITERAL, lookarounds, group references, anchors
            return False
    return True


def movable(trigger: re.Pattern[str]) -> bool:
    """Whether a trigger can run in the combined pass (see the module docstring)."""
    if trigger.flags & ~re.UNICODE or not trigger.pattern.isascii():  # flags change what the nodes mean
        return False
    try:
        parsed = parse(trigger)
    except re.error:  # pragma: no cover - it compiled once already
        return False
    return parsed.getwidth()[0] > 0 and _safe(parsed) and _compiles(trigger.pattern)


@functools.lru_cache(maxsize=None)  # a test compile per alternative of every trigger: once per process
def _compiles(pattern: str) -> bool:
    if hyperscan is None:
        return False
    try:
        hyperscan.Database().compile(expressions=[pattern.encode("ascii")])
    except hyperscan.error:
        return False
    return True


def _one_byte(error: UnicodeEncodeError) -> tuple[str, int]:
    # every character beyond Latin-1 becomes one byte, so offsets in the scanned bytes are offsets in the text
    return "\x80" * (error.end - error.start), error.end


codecs.register_error("mtl_screening_one_byte", _one_byte)


def _database(patterns: list[bytes], flags: int) -> Any:
    db = hyperscan.Database()
    db.compile(expressions=patterns, ids=list(range(len(patterns))), elements=len(patterns),
               flags=[flags] * len(patterns))
    return db


class TriggerScan:
    """A rule table's movable triggers, and the substrings of every rule's `also`, each in one Hyperscan database.

    `lines(reading)` gives, per moved rule index, the sorted indexes of the lines its trigger fires on;
    `present(reading)` the `also` substrings the text holds."""

    def __init__(self, rules: Sequence[Any], view: str) -> None:
        triggers = [rule.trigger if rule.then is None and rule.view == view else None for rule in rules]
        halves = {r: split_crossing(t) for r, t in enumerate(triggers) if t is not None and not movable(t)}
        halves = {r: half for r, half in halves.items() if half is not None}
        self.patterns = sorted({t.pattern for t in triggers if t is not None and movable(t)}
                               | {local for local, _ in halves.values()})
        ids = {p: i for i, p in enumerate(self.patterns)}
        self.compiled = [re.compile(p) for p in self.patterns]  # the same flags as the triggers: none
        self.rules_of: list[list[int]] = [[] for _ in self.patterns]
        for r, t in enumerate(triggers):
            if t is not None and t.pattern in ids:
                self.rules_of[ids[t.pattern]].append(r)
        self.split: dict[int, tuple[int, re.Pattern[str]]] = {r: (ids[local], crossing)
                                                               for r, (local, crossing) in halves.items()}
        """Rules whose trigger is split (split_crossing): rule index -> (its single-line half's pattern id, the
        half that can cross a line end)."""
        self.moved = frozenset(r for rules_ in self.rules_of for r in rules_) | frozenset(self.split)
        self.literals = sorted({word for rule in rules if rule.view == view for word in rule.also})
        self._triggers = self._words = None
        if hyperscan is not None and self.patterns:
            self._triggers = _database([p.encode("ascii") for p in self.patterns], 0)
        if hyperscan is not None and self.literals and all(self.literals):  # "" is in every text: tested per rule
            # each substring as its UTF-8 bytes, matched in the UTF-8 text: a byte match is a character match
            # (UTF-8 is self-synchronising); one report per substring is all a presence test needs
            self._words = _database([b"".join(b"\\x%02x" % b for b in w.encode("utf-8")) for w in self.literals],
                                    hyperscan.HS_FLAG_SINGLEMATCH)
        self._local = threading.local()  # a scan needs scratch space no other thread is using

    def _scratch(self, name: str, db: Any) -> Any:
        scratch = getattr(self._local, name, None)
        if scratch is None:
            scratch = hyperscan.Scratch(db)
            setattr(self._local, name, scratch)
        return scratch

    def present(self, lowered: str) -> frozenset[str] | None:
        """The `also` substrings lowered holds (None without Hyperscan: each rule tests its own)."""
        if self._words is None:
            return None
        found: set[int] = set()

        def on_match(pid: int, start: int, end: int, flags: int, context: object) -> None:
            found.add(pid)

        self._words.scan(lowered.encode("utf-8", "surrogatepass"), match_event_handler=on_match,
                         scratch=self._scratch("words", self._words))
        return frozenset(self.literals[i] for i in found)

    def lines(self, lowered: str, lowered_lines: Sequence[str], starts: Sequence[int]) -> dict[int, list[int]] | None:
        """Rule index -> the indexes of the lines its trigger fires on, in order, for every moved rule (None
        without Hyperscan). Hyperscan reads the ASCII lines; a line with another character is searched with the
        trigger itself (there `\\w` and `\\b` also see non-ASCII letters)."""
        if self._triggers is None:
            return None
        fired: list[set[int]] = [set() for _ in self.patterns]
        line_of = _LineOf(starts)

        def on_match(pid: int, start: int, end: int, flags: int, context: object) -> None:
            fired[pid].add(line_of(end - 1))  # a match lies inside one line: its last byte's

        data = lowered.encode("latin-1", "mtl_screening_one_byte")
        self._triggers.scan(data, match_event_handler=on_match, scratch=self._scratch("triggers", self._triggers))
        if not lowered.isascii():
            for index, line in enumerate(lowered_lines):
                if not line.isascii():
                    for pid, pattern in enumerate(self.compiled):
                        if pattern.search(line):
                            fired[pid].add(index)
                        else:
                            fired[pid].discard(index)
        out: dict[int, list[int]] = {}
        for pid, rules in enumerate(self.rules_of):
            ordered = sorted(fired[pid])
            for r in rules:
                out[r] = ordered
        for r, (pid, crossing) in self.split.items():
            lines = _split_lines(fired[pid], crossing, lowered, starts)
            if lines is not None:  # else the rule scans with its own trigger
                out[r] = lines
        return out


def _split_lines(local: set[int], crossing: re.Pattern[str], lowered: str, starts: Sequence[int]) -> list[int] | None:
    """The lines a split trigger's own `finditer` starts a match on: those its single-line half fires on and those
    where its crossing half matches, when no match of the crossing half, from any position, holds a line feed
    (then no match of the whole trigger crosses a line end, and, as for a moved trigger, "a line where it
    matches" is "a line where `finditer` starts a match"). None when one does: the rule's own scan decides.

    Every position where the crossing half matches is visited (searching again one character after each start),
    and the match found there is the one the whole trigger makes there when it takes that half: its alternatives
    keep their order."""
    found = set(local)
    line_of = _LineOf(starts)
    search, pos = crossing.search, 0
    while (match := search(lowered, pos)) is not None:
        if "\n" in match.group():
            return None
        found.add(line_of(match.start()))
        pos = match.start() + 1
    return sorted(found)


def split_crossing(trigger: re.Pattern[str]) -> tuple[str, re.Pattern[str]] | None:
    """A trigger that cannot move as a whole, as (its alternatives that can move, joined, as a pattern source; the
    others, compiled): `you\\s+are|ignor|...` gives `ignor|...` for the combined pass and `you\\s+are` to search
    alone. None when the trigger has no such halves (core/patterns.alternatives), either half can match the empty
    string, or the movable half does not move as a whole."""
    branches = alternatives(trigger)
    if branches is None:
        return None
    local = [b for b in branches if movable(re.compile(b, trigger.flags))]
    crossing = [b for b in branches if b not in local]
    if not local or not crossing:
        return None
    try:
        joined, rest = re.compile("|".join(local), trigger.flags), re.compile("|".join(crossing), trigger.flags)
    except re.error:  # pragma: no cover - each compiled inside the trigger
        return None
    if not movable(joined) or parse(rest).getwidth()[0] == 0:
        return None
    return joined.pattern, rest


class _LineOf:
    """The index of the line an offset is on; offsets mostly come in order, so the last answer is tried first."""

    def __init__(self, starts: Sequence[int]) -> None:
        self.starts, self.index = starts, 0

    def __call__(self, offset: int) -> int:
        starts, i = self.starts, self.index
        if starts[i] <= offset and (i + 1 == len(starts) or offset < starts[i + 1]):
            return i
        self.index = i = bisect.bisect_right(starts, offset) - 1
        return i


_SCANS: dict[tuple[int, str], tuple[Any, TriggerScan]] = {}
_SCANS_LOCK = threading.Lock()


def trigger_scan(rules: tuple[Any, ...], view: str) -> TriggerScan:
    """The combined scan of the rules of a table that read one view (built once per table and view; a rule index
    is its index in the table). Rules with a `then` keep their own trigger scan: they read whole texts."""
    with _SCANS_LOCK:
        held = _SCANS.get((id(rules), view))
        if held is None or held[0] is not rules:
            held = _SCANS[(id(rules), view)] = (rules, TriggerScan(rules, view))
        return held[1]

