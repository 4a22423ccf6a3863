"""Regular expressions made faster without changing a single match.

`first_class(pattern)` puts a look-ahead for the characters a pattern's matches can start with in front of it.
Python's engine skips ahead on its own only when the first character is fixed and case-sensitive; a pattern that
opens with a word boundary, a lookbehind, an optional prefix or a case-insensitive alternation is tried branch by
branch at every position of the text. The look-ahead is one class test, so most positions are turned down before
any branch runs. Used by screening's rules (their candidate lines), dedup's normalisation and redaction's rules.
"""

from __future__ import annotations

import re
from typing import Any

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
