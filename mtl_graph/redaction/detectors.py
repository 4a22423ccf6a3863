"""Yelp's detect-secrets plugins, with each finding mapped back to its exact span.

The plugins are instantiated once and called through their string-scanning API (`analyze_string`, the one
`scan_line` wraps), not through `scan_line` itself: that one reconfigures detect-secrets' global settings on every
call and, in its ad-hoc mode, returns every unquoted word as a high-entropy candidate. Which plugins run, and how:

- vendor plugins, on the lines the pre-scan gives them (the whole text on the full path; their patterns never cross
  a line), each value found then located everywhere in the text: AWS, Azure storage, Artifactory, Cloudant,
  Discord, GitHub, GitLab, IBM, JWT, Mailchimp, npm, OpenAI, PyPI, SendGrid, Slack, Softlayer, Square, Stripe,
  Telegram, Twilio, ... Every finding counts; those without a distinctive prefix must also look random (letters
  and digits), so CamelCase identifiers survive; a value glued to a letter or digit before it is the tail of a
  longer token (a build serial `...0611AKIA...`), not a key;
- the keyword detector, per line: only when the key's full name is a secret name and the value is not a reference
  or a placeholder;
- the base64 / hex high-entropy detectors, per line: only for quoted strings on a line that talks about secrets,
  never for checksums, git SHAs, UUIDs or base64 that decodes to readable text;
- left out: private keys (detected on the header line only — `secret_rules` redacts the whole block), basic auth
  (its greedy pattern can point at the wrong part of a URL — `secret_rules` has a precise one) and public IPs.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Iterator, Sequence

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters.heuristic import is_sequential_string
from detect_secrets.plugins import keyword
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin

from mtl_graph.core.patterns import first_class
from mtl_graph.redaction.prescan import Span, lines
from mtl_graph.redaction.rules import (
    CONTEXT, ENTROPY, KEYWORD, VENDOR, Finding, is_alias, is_checksum_or_id, is_reference_or_placeholder,
    is_secret_name, kind_of, looks_random,
)

_LEFT_OUT = {"PrivateKeyDetector", "BasicAuthDetector", "IPPublicDetector"}
_PREFIXED = {"GitHubTokenDetector", "GitLabTokenDetector", "JwtTokenDetector", "NpmDetector", "OpenAIDetector",
             "PypiTokenDetector", "SendGridDetector", "SlackDetector", "SquareOAuthDetector", "StripeDetector",
             "AzureStorageKeyDetector", "AWSKeyDetector"}
# Plugins whose pattern is quadratic on long lines without its anchor text (npm: `//.+/:_authToken=`) only run
# when that text is present.
_REQUIRES = {"NpmDetector": "_authToken"}
_KINDS = {"AWS Access Key": "aws_access_key", "Azure Storage Account access key": "azure_storage_key",
          "Basic Auth Credentials": "url_credentials", "JSON Web Token": "jwt", "NPM tokens": "npm_token",
          "OpenAI Token": "openai_key", "Stripe Access Key": "stripe", "Square OAuth Secret": "square",
          "Mailchimp Access Key": "mailchimp", "SendGrid API Key": "sendgrid", "Twilio API Key": "twilio"}
# The quotes-required set (detect-secrets' default for unknown file types): unquoted config values are ours.
_KEYWORD_REGEXES = keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
_LABEL = re.compile(r"^[A-Za-z_]+=(?=.{8})")
_TOKEN_TAIL = re.compile(r"\w*=*")
_IDENTIFIER_BEFORE = re.compile(r"[\w.-]*$")
_WORD = re.compile(r"\w*")
_DENYLIST = re.compile("|".join(keyword.DENYLIST), re.IGNORECASE)
# Where a denylisted name starts (every start, overlapping ones too: "key_password" holds two). The regexes that open
# with the denylist group (the same alternation, the same flags) can only match from one of these places.
_NAME_STARTS = first_class(re.compile(f"(?=(?:{'|'.join(keyword.DENYLIST)}))", re.IGNORECASE))
_OPENS_WITH_NAME = {regex: regex.pattern.startswith(f"({'|'.join(keyword.DENYLIST)})")
                    and regex.flags == _NAME_STARTS.flags for regex in _KEYWORD_REGEXES}
SECRET_TALK = re.compile(r"(?i)secret|token|passw|api.?key|private|credential|auth(?!or)")
_KEYWORD_HINT = re.compile(r"(?i)key|pass|pwd|secret|contrase")
_ENTROPY_MIN_LENGTH = 20


def kind_for(secret_type: str) -> str:
    """A short marker kind for a detect-secrets secret type ("GitHub Token" -> github_token)."""
    return _KINDS.get(secret_type) or re.sub(r"\W+", "_", secret_type.lower()).strip("_")


@lru_cache(maxsize=1)
def plugins() -> tuple[list[BasePlugin], BasePlugin, list[HighEntropyStringsPlugin]]:
    """(vendor plugins, keyword detector, entropy detectors), built once: detect-secrets plugins are stateless."""
    vendor, entropy, detector = [], [], None
    for cls in get_mapping_from_secret_type_to_class().values():
        name = cls.__name__
        if name in _LEFT_OUT:
            continue
        plugin = cls()
        if isinstance(plugin, HighEntropyStringsPlugin):
            entropy.append(plugin)
        elif isinstance(plugin, keyword.KeywordDetector):
            detector = plugin
        else:
            vendor.append(plugin)
    return vendor, detector, entropy


def _locate(text: str, value: str) -> Iterator[tuple[int, int]]:
    """Every occurrence of value in text that starts a token; a match cut short by a fixed-length regex is
    extended to the end of its token so no tail of the secret survives."""
    start = text.find(value)
    while start >= 0:
        before = text[start - 1] if start else " "
        # A value glued to a letter or digit is the tail of a longer token (a hash, a word, a build serial), except a
        # number right after a word (Telegram's `bot<digits>:<token>`).
        if not (before.isalnum() or before == "_") or (before.isalpha() and value[0].isdigit()):
            end = start + len(value)
            if value[-1].isalnum():
                end += _TOKEN_TAIL.match(text, end).end() - end
            yield start, end
        start = text.find(value, start + len(value))


def _clean(value: str) -> str:
    """Trim the delimiters and labels some detect-secrets regexes capture along with the secret."""
    value = value.strip().strip("\"'=:,")
    value = value.split()[0] if value.split() else ""
    return _LABEL.sub("", value)


def plugin_findings(plugin: BasePlugin, text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """One vendor plugin's secrets. Each span is scanned from the line feed before it (the plugins anchor on `^` or
    a space there); every value found is then located in the whole text, so no copy of it elsewhere survives."""
    name = type(plugin).__name__
    if _REQUIRES.get(name, "") not in text:
        return
    prefixed = name in _PREFIXED
    values = {_clean(raw) for start, end in spans for raw in plugin.analyze_string(text[max(start - 1, 0):end])}
    for value in sorted(values):
        if len(value) < 8 or (not prefixed and not looks_random(value)):
            continue
        # Keyword-anchored plugins (IBM, Cloudant, ...) rank with our assignment rules: the longer span names it.
        for start, end in _locate(text, value):
            yield Finding(start, end, kind_for(plugin.secret_type), VENDOR if prefixed else CONTEXT)


def keyword_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """detect-secrets' keyword detector on each line that names a secret."""
    for offset, line in lines(text, spans):
        if _KEYWORD_HINT.search(line):
            yield from _shifted(_keyword_findings(line), offset)


def entropy_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """detect-secrets' base64 / hex entropy detectors on each line that talks about secrets."""
    entropy = plugins()[2]
    for offset, line in lines(text, spans):
        if SECRET_TALK.search(line):
            yield from _shifted(_entropy_findings(line, entropy), offset)


def _shifted(found: Iterator[Finding], offset: int) -> Iterator[Finding]:
    for f in found:
        yield f._replace(start=f.start + offset, end=f.end + offset)


def _matches(regex: re.Pattern[str], line: str, starts: list[int]) -> Iterator[re.Match[str]]:
    """regex.finditer(line), match for match: a regex opening with the denylist group is tried only where a name
    starts (finditer tries every position and the first that matches wins; no other position can)."""
    if not _OPENS_WITH_NAME[regex]:
        yield from regex.finditer(line)
        return
    pos = 0
    for start in starts:
        if start >= pos and (m := regex.match(line, start)) is not None:
            yield m
            pos = max(m.end(), start + 1)


def _keyword_findings(line: str) -> Iterator[Finding]:
    # Every match holds a denylisted name (the quote-first regex one case-sensitively, so caselessly too): a line
    # without one has no finding, and the regexes (case-insensitive alternations tried at every position) are the
    # costly part of redaction on code and logs.
    starts = [m.start() for m in _NAME_STARTS.finditer(line)]
    if not starts:
        return
    for regex, group in _KEYWORD_REGEXES.items():
        for m in _matches(regex, line, starts):
            value = m.group(group)
            # The key is after the value in `"bar" == password`, before it everywhere else.
            word = _DENYLIST.search(line, m.end(group), m.end()) or _DENYLIST.search(line, m.start(), m.start(group))
            if word is None:
                continue
            start = word.start() - len(_IDENTIFIER_BEFORE.search(line, max(0, word.start() - 100), word.start())[0])
            name = line[start:_WORD.match(line, word.end()).end()]
            if (is_secret_name(name) and not is_reference_or_placeholder(value, quoted=True)
                    and not is_alias(name, value)):
                yield Finding(m.start(group), m.end(group), kind_of(name), KEYWORD)


def shannon_entropy(plugin: HighEntropyStringsPlugin, value: str) -> float:
    """plugin.calculate_shannon_entropy(value), bit for bit, at a fraction of its cost: it counts each of the charset's
    characters with `str.count`; this counts once and sums the same terms in the same order. (The hex plugin's
    all-digits correction never applies here: values reaching this check contain a letter.)"""
    counts = Counter(value)
    entropy = 0.0
    for x in plugin.charset:
        if x in counts:
            p_x = float(counts[x]) / len(value)
            entropy += - p_x * math.log(p_x, 2)
    return entropy


def _entropy_findings(line: str, detectors: list[HighEntropyStringsPlugin]) -> Iterator[Finding]:
    for plugin in detectors:
        for m in plugin.regex.finditer(line):
            value = m.group(2)
            # The entropy last: it is the costly check.
            if (len(value) >= _ENTROPY_MIN_LENGTH and looks_random(value) and not is_checksum_or_id(value)
                    and not is_sequential_string(value) and shannon_entropy(plugin, value) > plugin.entropy_limit):
                yield Finding(m.start(2), m.end(2), "high_entropy", ENTROPY)
