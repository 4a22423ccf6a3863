"""Base64 values that hide a secret: decoded and scanned again by every rule.

A Kubernetes `Secret`'s `data:` holds every value base64-encoded (`DATABASE_URL: cG9zdGdyZXM6Ly9...`), a
kubeconfig's `client-key-data:` is a base64 PEM key, and `kubectl get secret -o jsonpath=...` or `base64` print
the bare encoding; base64 hides the value's own shape. So any base64 run (a YAML or JSON value, a list item, a
line of its own, and the lines of a wrapped block joined) that decodes to text is scanned again by the whole rule
set, as the text itself and, after a name, as `name=<text>`; when that finds a secret, the whole encoded value is
redacted under the kind found inside. Certificates, readable constants and binary data decode to nothing secret
and stay.

Inside a Kubernetes Secret (`kind: Secret`, YAML or JSON) the document itself says that its `data:` and
`stringData:` values are secret: a value there that is a token by itself (a random password, a hex key, a UUID)
is redacted even under a name that says nothing; readable values (`info`, `eu-west-1`, a config file without
secrets) stay.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Callable, Iterator, Sequence

from mtl_graph.redaction.prescan import CONTEXT, ENTROPY, Finding, Span, finditer
from mtl_graph.redaction.shapes import is_token
from mtl_graph.redaction.words import is_word_identifier

_B64 = r"[A-Za-z0-9+/]"
ENCODED = re.compile(rf"(?<![\w+/.-]){_B64}{{16,}}={{0,2}}(?![\w+/=-])")
"""A base64 run of 12 bytes or more, not glued to a word, a path or a longer token (a name like `a.b64` too)."""
# A wrapped block: lines holding nothing but base64 (the output of `base64`, a YAML block scalar), each but the
# last of one width.
_WRAPPED = re.compile(rf"(?m)^(?P<indent>[ \t]*)(?P<first>{_B64}{{40,}})[ \t]*\r?\n"
                      rf"(?P<rest>(?:(?P=indent){_B64}{{2,}}={{0,2}}[ \t]*(?:\r?\n|\Z))+)")
_NAME_BEFORE = re.compile(r"(?P<name>[\w.-]+)[\"']?[ \t]*[:=][ \t]*[\"']?\Z")
MAX_DECODED = 1 << 20
"""Longest encoded value decoded (a kubeconfig key is a few KB; larger blobs are binary artefacts)."""


def decode_text(value: str) -> str | None:
    """The UTF-8 text a base64 value encodes, or None (not base64, binary, or control characters)."""
    if len(value) > MAX_DECODED or len(value) % 4 == 1:
        return None
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return text if all(c.isprintable() or c in "\n\r\t" for c in text) else None


def _candidates(text: str, spans: Sequence[Span]) -> Iterator[tuple[int, int, str]]:
    """(start, end, base64) of every run, and of every wrapped block as one value."""
    for m in finditer(ENCODED, text, spans):
        yield m.start(), m.end(), m[0]
    for m in finditer(_WRAPPED, text, spans):
        rows = [m["first"], *(row.strip() for row in m["rest"].splitlines() if row.strip())]
        if all(len(row) == len(rows[0]) for row in rows[:-1]) and len(rows[-1]) <= len(rows[0]):
            end = m.start("rest") + len(m["rest"].rstrip())
            yield m.start("first"), end, "".join(rows)


def encoded_findings(secret_kind: Callable[[str], str | None], text: str,
                     spans: Sequence[Span]) -> Iterator[Finding]:
    """Encoded values whose decoded text holds a secret; secret_kind(text) names the secret found in text, if any."""
    for start, end, value in _candidates(text, spans):
        decoded = decode_text(value)
        if decoded is None:
            continue
        kind = secret_kind(decoded)
        name = _NAME_BEFORE.search(text, max(start - 100, 0), start)
        if kind is None and name is not None and "\n" not in decoded.strip():
            kind = secret_kind(f"{name['name']}={decoded.strip()}")
        if kind is not None:
            yield Finding(start, end, kind, CONTEXT)


# --- inside a Kubernetes Secret ------------------------------------------------------------------------------------

_YAML_BLOCK = re.compile(r"(?m)^(?P<indent>[ \t]*)(?P<key>data|stringData):[ \t]*\r?$")
_YAML_ENTRY = re.compile(r"(?P<indent>[ \t]+)[\"']?[\w.-]+[\"']?:[ \t]+(?:(?P<q>[\"'])(?P<quoted>[^\"'\n]+)(?P=q)"
                         r"|(?P<plain>[^\s\"'#|>][^\n]*?))[ \t]*(?:[ \t]#[^\n]*)?\r?")
_YAML_KIND = re.compile(r"kind:[ \t]*[\"']?Secret[\"']?[ \t]*\r?")
_JSON_BLOCK = re.compile(r"\"(?P<key>data|stringData)\"[ \t]*:[ \t]*\{(?P<body>[^{}]*)\}")
_JSON_KEY = re.compile(r"\"(?:data|stringData)\"[ \t]*:[ \t]*\{")
_JSON_ENTRY = re.compile(r"\"[\w.-]+\"[ \t\r\n]*:[ \t\r\n]*\"(?P<value>[^\"\\\s]+)\"")
_JSON_KIND = re.compile(r"\"kind\"[ \t\r\n]*:[ \t\r\n]*\"Secret\"")
_LOWER, _UPPER, _DIGIT = re.compile("[a-z]"), re.compile("[A-Z]"), re.compile("[0-9]")
_CASED_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+")
MIN_SECRET_VALUE = 8
MAX_DOCUMENT_LINES = 500
"""Lines looked at each way from a `data:` line for the document's `kind: Secret` (a Secret is a short document)."""
"""Shorter values of a Secret (`admin`, `5432`) are names and numbers, not credentials."""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _lines_from(text: str, pos: int, step: int) -> Iterator[tuple[int, str]]:
    """(start, line) of the lines after (step 1) or before (step -1) the line starting at pos, nearest first."""
    if step > 0:
        while (end := text.find("\n", pos)) >= 0:
            pos = end + 1
            stop = text.find("\n", pos)
            yield pos, text[pos:stop if stop >= 0 else len(text)]
    else:
        while pos > 0:
            start = text.rfind("\n", 0, pos - 1) + 1
            yield start, text[start:pos - 1]
            pos = start


def _yaml_secret_blocks(text: str, spans: Sequence[Span]) -> Iterator[tuple[str, int, int, int]]:
    """(key, start, end, entry indent) of each `data:` / `stringData:` block of a YAML Secret document whose key
    line is in spans (the block and the document around it are read from the whole text)."""
    for m in finditer(_YAML_BLOCK, text, spans):
        depth = len(m["indent"])
        line_start = m.start() if m.start() == 0 or text[m.start() - 1] == "\n" else text.rfind("\n", 0, m.start()) + 1
        # The block: the lines below indented deeper; the document: the lines at its own depth around it.
        block_end, indent, kind = m.end(), None, False
        for direction in (1, -1):
            in_block = direction == 1
            for n, (start, line) in enumerate(_lines_from(text, line_start, direction)):
                if n >= MAX_DOCUMENT_LINES:
                    break
                stripped = line.strip()
                if not stripped:
                    continue
                if in_block and _indent(line) > depth:
                    block_end = start + len(line)
                    indent = _indent(line) if indent is None else indent
                    continue
                in_block = False
                if stripped == "---" or _indent(line) < depth:
                    break
                kind = kind or (_indent(line) == depth and bool(_YAML_KIND.fullmatch(line[depth:])))
        if kind:
            yield m["key"], m.end(), block_end, depth + 2 if indent is None else indent


def _json_object_around(text: str, start: int, end: int) -> str:
    """The text of the innermost JSON object holding text[start:end] (braces counted, strings not parsed)."""
    depth, left = 0, start
    while left > 0:
        left -= 1
        depth += {"}": 1, "{": -1}.get(text[left], 0)
        if depth < 0:
            break
    depth, right = 0, end
    while right < len(text):
        depth += {"{": 1, "}": -1}.get(text[right], 0)
        right += 1
        if depth < 0:
            break
    return text[left:right]


def _secret_value(key: str, value: str) -> bool:
    """A `data:` value (base64) or `stringData:` value (plain) that is a token by itself."""
    plain = decode_text(value) if key == "data" else value
    if plain is None or "\n" in plain.strip():
        return False
    plain = plain.strip()
    if "[REDACTED:" in plain:  # redacted already: redaction is idempotent
        return False
    if is_token(plain, MIN_SECRET_VALUE):
        return True
    # A password: a word of it mixes cases with digits or within itself (`hN4wog6..~^W1O9~`, `x9Rs2 horse
    # battery`, `RRBEr horse`); names, regions and versions (`eu-west-1`, `v1.2.3-rc1`, `Summer Breeze`) do not.
    return len(plain) >= MIN_SECRET_VALUE and any(_is_password_word(w) for w in plain.split())


def _is_password_word(word: str) -> bool:
    if len(word) < 4 or is_word_identifier(word) or not (_LOWER.search(word) and _UPPER.search(word)):
        return False
    return bool(_DIGIT.search(word)) or not _CASED_WORD.fullmatch(word.strip(".,;:!?"))


def secret_document_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """Token-shaped values of a Kubernetes Secret's `data:` / `stringData:`, whatever their names: the rule runs on
    the lines that open such a block and reads the block and its document from the whole text."""
    for key, start, end, indent in _yaml_secret_blocks(text, spans):
        pos = start
        for line in text[start:end].split("\n"):
            m = _YAML_ENTRY.fullmatch(line)
            group = "quoted" if m and m["quoted"] else "plain"
            if m and len(m["indent"]) == indent and _secret_value(key, m[group]):
                yield Finding(pos + m.start(group), pos + m.end(group), "secret", ENTROPY)
            pos += len(line) + 1
    for key in finditer(_JSON_KEY, text, spans):
        m = _JSON_BLOCK.match(text, key.start())
        if m is None or not _JSON_KIND.search(_json_object_around(text, m.start(), m.end())):
            continue
        for entry in _JSON_ENTRY.finditer(m["body"]):
            if _secret_value(m["key"], entry["value"]):
                offset = m.start("body")
                yield Finding(offset + entry.start("value"), offset + entry.end("value"), "secret", ENTROPY)
