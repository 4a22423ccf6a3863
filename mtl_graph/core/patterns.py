"""Regular expressions made faster without changing a single match.

`first_class(pattern)` puts a look-ahead for the characters a pattern's matches can start with in front of it.
`line_search(pattern)` answers whether a pattern matches anywhere in one line, trying the alternatives that open
with `^` where the line starts only.
Python's engine skips ahead on its own only when the first character is fixed and case-sensitive; a pattern that
opens with a word boundary, a lookbehind, an optional prefix or a case-insensitive alternation is tried branch by
branch at every position of the text. The look-ahead is one class test, so most positions are turned down before
any branch runs. Used by screening's rules (their candidate lines), dedup's normalisation and redaction's rules.
"""

from __future__ import annotations

import re
from typing import Any, Callable

try:  # Python 3.11 moved the parser; the old name still works there with a warning
    from re import _constants as _c, _parser as _sre_parse
except ImportError:  # pragma: no cover
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

regex_constants = _c
"""The opcodes of a parsed pattern (`parse`)."""


def parse(pattern: re.Pattern[str]) -> Any:
    """A compiled pattern's parse tree, as Python's own compiler reads it (raises re.error if it does not parse)."""
    return _sre_parse.parse(pattern.pattern, pattern.flags)


def _first_items(parsed: Any) -> tuple[list[str] | None, bool]:
    """The class items (regex source) one of which every match of `parsed` starts with, and whether it can match
    the empty string; None when that cannot be said (a negated class, any character, a group reference)."""
    items: list[str] = []
    for op, arg in parsed:
        found, empty = _first_of_node(op, arg)
        if found is None:
            return None, False
        items += found
        if not empty:
            return items, False
    return items, True


_CATEGORIES = {_c.CATEGORY_DIGIT: r"\d", _c.CATEGORY_WORD: r"\w", _c.CATEGORY_SPACE: r"\s",
               _c.CATEGORY_NOT_DIGIT: r"\D", _c.CATEGORY_NOT_WORD: r"\W", _c.CATEGORY_NOT_SPACE: r"\S"}


def _char(code: int) -> str:
    return "\\x%02x" % code if code < 0x100 else ("\\u%04x" % code if code < 0x10000 else "\\U%08x" % code)


def _first_of_node(op: Any, arg: Any) -> tuple[list[str] | None, bool]:
    if op is _c.LITERAL:
        return [_char(arg)], False
    if op is _c.IN:
        items = []
        for item_op, item in arg:
            if item_op is _c.LITERAL:
                items.append(_char(item))
            elif item_op is _c.RANGE:
                items.append(f"{_char(item[0])}-{_char(item[1])}")
            elif item_op is _c.CATEGORY and item in _CATEGORIES:
                items.append(_CATEGORIES[item])
            else:  # NEGATE, and anything unforeseen
                return None, False
        return items, False
    if op is _c.ASSERT and arg[0] == 1:  # a look-ahead that must read a character: the match starts with one of its
        found, empty = _first_items(arg[1])
        return ([], True) if found is None or empty else (found, False)
    if op in (_c.AT, _c.ASSERT, _c.ASSERT_NOT):  # zero width: what follows starts the match
        return [], True
    if op is _c.BRANCH:
        items, empty = [], False
        for branch in arg[1]:
            found, branch_empty = _first_items(branch)
            if found is None:
                return None, False
            items += found
            empty = empty or branch_empty
        return items, empty
    if op is _c.SUBPATTERN:
        group, add_flags, del_flags, sub = arg
        return (None, False) if add_flags or del_flags else _first_items(sub)
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
        found, empty = _first_items(arg[2])
        return found, empty or arg[0] == 0
    return None, False  # ANY, NOT_LITERAL, group references, conditionals


def _engine_skips(parsed: Any, flags: int) -> bool:
    """Whether Python's compiler gives the pattern a literal prefix or a first-character set (what it scans for in C
    before trying a match); a look-ahead in front would take that away."""
    try:
        from re import _compiler
    except ImportError:  # pragma: no cover - before 3.11
        import sre_compile as _compiler  # type: ignore[no-redef]
    try:
        if parsed.getwidth()[0] == 0:
            return False
        prefix, _, _ = _compiler._get_literal_prefix(parsed, flags)
        return bool(prefix) or bool(_compiler._get_charset_prefix(parsed, flags))
    except Exception:  # pragma: no cover - a private helper changed: the look-ahead is still exact
        return False


def first_class(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """The same pattern behind a look-ahead for the characters its matches can start with.

    The class is built from the pattern's own first items (literals, classes, categories, through groups,
    alternations, optional parts and zero-width assertions) under the pattern's own flags, case folding included,
    so a position it refuses is one where the pattern cannot match: the same matches, groups and spans, with
    `pos` and `endpos` too (tests/core/test_patterns.py). A pattern whose first character cannot be told (it may
    match the empty string, or start with any character) is returned as it is."""
    try:
        parsed = parse(pattern)
    except re.error:  # pragma: no cover - it compiled once already
        return pattern
    if _engine_skips(parsed, pattern.flags):
        return pattern  # the engine already skips ahead to a literal prefix or a set of first characters
    items, empty = _first_items(parsed)
    if items is None or empty or not items:
        return pattern
    try:
        return re.compile(f"(?=[{''.join(items)}])(?:{pattern.pattern})", pattern.flags)
    except re.error:  # a pattern that must stay whole (global inline flags): it runs as it is
        return pattern


def line_search(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    """Whether `pattern` matches anywhere in a line (a text without a line feed): the answer of
    `pattern.search(line) is not None`, found sooner.

    An alternation matches somewhere when one of its alternatives does. A top-level alternative that opens with `^`
    can match only where the line starts (there is no line feed to follow), so those alternatives are tried there
    alone, with `match`; the others are searched behind their own first-character look-ahead (first_class), which
    no longer admits every character the anchored ones may start with (`^\\s*`, `^[\\s#>*=-]*SYSTEM` admit almost
    all). A pattern that cannot be split safely (group references, conditionals, an alternation Python's parser
    rewrote, global flags) is searched as it is, behind first_class. Tested against `search` on generated lines and
    on every screening rule's lines (tests/core/test_patterns.py, tests/memory/screening)."""
    whole = first_class(pattern)
    parts = _anchored_split(pattern)
    if parts is None:
        return lambda line: whole.search(line) is not None
    start, rest = parts[0].match, first_class(parts[1]).search
    return lambda line: start(line) is not None or rest(line) is not None


def _anchored_split(pattern: re.Pattern[str]) -> tuple[re.Pattern[str], re.Pattern[str]] | None:
    """(the top-level alternatives that open with `^`, the others), each compiled with the pattern's flags; None
    when there is no anchored alternative, or the split is not certain (when every alternative is anchored the
    parser itself factors the `^` out)."""
    branches = alternatives(pattern)
    if branches is None:
        return None
    anchored = [b for b in branches if b.startswith("^")]
    others = [b for b in branches if not b.startswith("^")]
    if not anchored or not others:
        return None
    try:
        return re.compile("|".join(anchored), pattern.flags), re.compile("|".join(others), pattern.flags)
    except re.error:
        return None


def alternatives(pattern: re.Pattern[str]) -> list[str] | None:
    """The sources of a pattern's top-level alternatives, each of which compiles alone with the pattern's flags to
    what it is inside the pattern; None when that is not certain: one alternative, group references and
    conditionals (they tie alternatives together), global or verbose flags, or an alternation Python's parser
    rewrote (a common prefix factored out, single characters made a class)."""
    source = pattern.pattern
    if not isinstance(source, str) or pattern.flags & re.VERBOSE \
            or re.search(r"\(\?P=|\(\?\(|\\[1-9]|^\(\?[a-zA-Z]+\)", source):
        return None
    branches = _top_level_alternatives(source)
    try:
        data = list(parse(pattern))
    except re.error:  # pragma: no cover - it compiled once already
        return None
    if len(branches) < 2 or len(data) != 1 or data[0][0] is not _c.BRANCH or len(data[0][1][1]) != len(branches):
        return None
    return branches


def _top_level_alternatives(source: str) -> list[str]:
    """The source split at each `|` outside groups, classes and escapes."""
    out, depth, start, i, n = [], 0, 0, 0, len(source)
    while i < n:
        char = source[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":  # a class: `]` right after `[` or `[^` is a member, not its end
            i += 1
            i += source[i:i + 1] == "^"
            i += source[i:i + 1] == "]"
            while i < n and source[i] != "]":
                i += 2 if source[i] == "\\" else 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            out.append(source[start:i])
            start = i + 1
        i += 1
    out.append(source[start:])
    return out
