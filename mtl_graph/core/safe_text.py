"""Strings from the agent's side made safe to serialise: what a run records must never fail to encode.

A file name that is not UTF-8 reaches Python as lone surrogates (``os`` decodes names with surrogateescape), and
a model may send lone surrogates as JSON escapes; every UTF-8 encoder (the run log, a checkpointer, a server's
stream) refuses them. Had such a string reached a writer, the run would end as an ``error``: something an agent's
files must never cause. So each escaped byte becomes the four characters ``\\xNN`` (the name stays recognisable,
as ``ls -b`` shows it) and any other lone surrogate U+FFFD.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"


def safe_text(text: str) -> str:
    """text with its lone surrogates replaced (the same object when it has none)."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: _escaped(m.group()), text)


def safe_json_text(line: str) -> str:
    """A JSON document written with ``ensure_ascii=False`` with its lone surrogates replaced: they can only stand
    inside its strings, where the replacement is written as JSON (``\\\\xNN``)."""
    if _SURROGATE.search(line) is None:
        return line
    return _SURROGATE.sub(lambda m: json.dumps(_escaped(m.group()))[1:-1], line)


def safe_value(value: Any) -> Any:
    """value with every string inside its dicts (keys too), lists and tuples made safe by `safe_text`; other
    objects are kept as they are. Returns the same object when nothing needed a change, so the common case
    copies nothing."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        items = [(safe_value(k), safe_value(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        items = [safe_value(v) for v in value]
        if all(v is v0 for v, v0 in zip(items, value)):
            return value
        return type(value)(items) if type(value) in (list, tuple) else items
    return value
