"""Text as screening reads it: obfuscation undone before any rule runs.

A rule written for "ignore" must also see "іgnоrе" (Cyrillic і, о, е), "ig\u200bnore", "ｉｇｎｏｒｅ", "i\ufe0fgnore",
a command hidden in base64 or hex, and an instruction spelled in invisible tag characters. `views()` returns two
readings of a text, both with every decodable payload it carries appended as extra lines:

- `latin`: NFKC, invisible characters dropped, every non-ASCII look-alike of an ASCII character folded to it
  (Unicode's TR39 confusables table, from `confusable-homoglyphs`), diacritics stripped. English, Spanish, French
  and German rules read this one (their patterns are written without accents).
- `native`: NFKC, invisible characters and diacritics dropped, each script kept, Latin look-alikes inside
  Cyrillic words folded the other way, so Chinese, Japanese and Russian rules read their own scripts.
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable
from urllib.parse import unquote

from confusable_homoglyphs import confusables

# Format characters (zero-width, bidi controls, tag characters, soft hyphen, word joiners), variation selectors,
# the combining grapheme joiner and the Hangul / Khmer fillers: none of them is visible and each can split a word.
_INVISIBLE = re.compile(r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                        r"\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f\U000e0100-\U000e01ef]")
# Control characters and terminal escapes split a word as well as a zero-width space does ("ig\x00nore").
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_TAG_RUN = re.compile(r"[\U000e0020-\U000e007e]{4,}")  # ASCII spelled in tag characters: read by models, not people
_COMBINING = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_CYRILLIC_WORD = re.compile(r"\b\w*[\u0400-\u04ff]\w*\b")
_LATIN_TO_CYRILLIC = str.maketrans("aceopxyABCEHKMOPTX", "асеорхуАВСЕНКМОРТХ")

# Payloads hide in long tokens, so the text is split (fast) and only tokens of 16+ characters are matched.
_BASE64 = re.compile(r"(?<![\w+/-])[A-Za-z0-9+/_-]{12,}={0,2}(?![\w+/=-])")
_HEX = re.compile(r"(?:0x)?((?:[0-9a-fA-F]{2}){8,})|(?:[0-9a-fA-F]{2}:){7,}[0-9a-fA-F]{2}")
_HEX_PAIR = re.compile(r"[0-9a-fA-F]{2}")
_HEX_ESCAPES = re.compile(r"(?:\\x[0-9a-fA-F]{2}){4,}")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_URL_PARTS = re.compile(r"[?&=#]")
_PUNCTUATION = "\"'`()[]{}<>,;.!?"
_MAX_DEPTH = 4  # nested encodings (base64 of hex of ...) read this deep; each level decodes what the last found


@dataclass(frozen=True)
class Views:
    """The two readings of a text that rules match against."""

    latin: str
    """Look-alikes folded to ASCII, diacritics stripped: for rules in Latin-script languages."""
    native: str
    """Each script kept (Latin look-alikes inside Cyrillic words folded to Cyrillic): for zh, ja, ru rules."""
    ascii_only: bool
    """The text (payloads included) was plain ASCII: rules for other scripts can be skipped."""


@functools.cache
def _fold_table() -> dict[int, str]:
    """Every non-ASCII character whose confusable prototype is printable ASCII, mapped to that prototype."""
    table: dict[int, str] = {}
    for char, homoglyphs in confusables.confusables_data.items():
        if len(char) != 1 or char.isascii():
            continue
        # a prototype with a mark ("n̩" for Greek eta) still reads as its letters
        bare = (_COMBINING.sub("", unicodedata.normalize("NFD", h["c"])) for h in homoglyphs)
        target = next((c for c in bare if c.isascii() and c.isprintable() and c.strip()), None)
        if target is not None:
            # TR39 folds capital I to l; a capital look-alike of I must stay a capital I for words like "IGNORE".
            table[ord(char)] = "I" if target == "l" and char.isupper() else target
    return table


def _readable(raw: bytes) -> str | None:
    """Decoded bytes as text when they look like something a person or a shell would read, else None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    letters = sum(ch.isalpha() for ch in text)
    return text if printable >= 0.95 * len(text) and letters >= 4 else None


def _b64(token: str) -> str | None:
    if token.islower() or token.isupper() or len(token.rstrip("=")) % 4 == 1:
        return None  # snake_case names and paths are not base64 of text, which mixes cases; 4n+1 is never base64
    padded = token + "=" * (-len(token) % 4)
    try:
        raw = (base64.urlsafe_b64decode if ("-" in token or "_" in token) else base64.b64decode)(padded)
    except (binascii.Error, ValueError):
        return None
    return _readable(raw)


def _hex(digits: str) -> str | None:
    digits = re.sub(r"\\x|[ :]", "", digits)
    digits = digits[2:] if digits[:2].lower() == "0x" else digits
    try:
        return _readable(bytes.fromhex(digits))
    except ValueError:
        return None


def _decoded(text: str) -> list[str]:
    """What one level of encoding in `text` hides."""
    found: list[str] = []
    tokens = text.split()
    for token in tokens:
        if len(token) < 16:
            continue
        core = token.strip(_PUNCTUATION)
        found += [t for t in (_b64(m.group()) for m in _BASE64.finditer(core)) if t]
        found += [t for t in (_hex(m.group()) for m in _HEX.finditer(core)) if t]
        if _PERCENT.search(core):  # a URL's query or path value, decoded alone so it starts a line
            found += [unquote(part) for part in _URL_PARTS.split(core) if "%" in part]
    pairs: list[str] = []  # hex written as separate bytes: "69 67 6e 6f ..."
    for token in [*tokens, ""]:
        if len(token) == 2 and _HEX_PAIR.fullmatch(token):
            pairs.append(token)
            continue
        if len(pairs) >= 8 and (decoded := _hex("".join(pairs))):
            found.append(decoded)
        pairs = []
    if "\\x" in text:
        found += [t for t in (_hex(m.group()) for m in _HEX_ESCAPES.finditer(text)) if t]
    if "&#" in text:
        found.append(html.unescape(text))
    return found


def payloads(text: str) -> list[str]:
    """Texts hidden in `text` (already cleaned): base64, hex, percent-encoding, HTML entities, nested ones too."""
    found: list[str] = []
    frontier = [text]
    for _ in range(_MAX_DEPTH):
        frontier = [_clean(t) for item in frontier for t in _decoded(item)]
        if not frontier:
            break
        found += frontier
    return found


def _clean(text: str) -> str:
    """NFKC with invisible characters dropped; an instruction spelled in tag characters is kept as its own line."""
    text = _CONTROL.sub("", text)
    if text.isascii():
        return text
    hidden = ["".join(chr(ord(ch) - 0xE0000) for ch in m.group()) for m in _TAG_RUN.finditer(text)]
    return "\n".join([_INVISIBLE.sub("", unicodedata.normalize("NFKC", text)), *hidden])


def _latin(text: str) -> str:
    if text.isascii():
        return text
    folded = text.translate(_fold_table())
    return unicodedata.normalize("NFC", _COMBINING.sub("", unicodedata.normalize("NFD", folded)))


def _native(text: str) -> str:
    # Marks are decoration an attacker adds ("и́"); the patterns are written without them (й reads as и, ё as е).
    bare = unicodedata.normalize("NFC", _COMBINING.sub("", unicodedata.normalize("NFD", text)))
    return _CYRILLIC_WORD.sub(lambda m: m.group().translate(_LATIN_TO_CYRILLIC), bare)


def _by_line(transform: Callable[[str], str], text: str) -> str:
    """transform applied to the lines that are not ASCII, the others kept as they are: the same text as transform
    applied to the whole (both readings leave ASCII as it is, work character by character or inside a word, and
    the line feed is a stable character for Unicode normalisation: no mark reorders or composes across it), at the
    cost of the few lines that need it."""
    return "\n".join(line if line.isascii() else transform(line) for line in text.split("\n"))


def views(text: str, *, by_line: bool = True) -> Views:
    """Both readings of `text`, with the payloads it hides appended as lines. by_line=False reads the whole text at
    once (the reference the line-by-line reading is tested against)."""
    text = _clean(text)
    text = "\n".join([text, *payloads(text)])
    plain = text.isascii()
    if plain:
        return Views(latin=text, native=text, ascii_only=True)
    if by_line:
        return Views(latin=_by_line(_latin, text), native=_by_line(_native, text), ascii_only=False)
    return Views(latin=_latin(text), native=_native(text), ascii_only=False)
