"""Yelp's detect-secrets plugins, with each finding mapped back to its exact span.

The plugins are instantiated once and called through their string-scanning API (`analyze_string`, the one
`scan_line` wraps), not through `scan_line` itself: that one reconfigures detect-secrets' global settings on every
call and, in its ad-hoc mode, returns every unquoted word as a high-entropy candidate. Which plugins run, and how:

- vendor plugins, on the whole text at once (their patterns never cross a line): AWS, Azure storage, Artifactory,
  Cloudant, Discord, GitHub, GitLab, IBM, JWT, Mailchimp, npm, OpenAI, PyPI, SendGrid, Slack, Softlayer, Square,
  Stripe, Telegram, Twilio, ... Every finding counts; those without a distinctive prefix must also look random
  (letters and digits), so CamelCase identifiers survive;
- the keyword detector, per line: only when the key's full name is a secret name and the value is not a reference
  or a placeholder;
- the base64 / hex high-entropy detectors, per line: only for quoted strings on a line that talks about secrets,
  never for checksums, git SHAs, UUIDs or base64 that decodes to readable text;
- left out: private keys (detected on the header line only — `secret_rules` redacts the whole block), basic auth
  (its greedy pattern can point at the wrong part of a URL — `secret_rules` has a precise one) and public IPs.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterator

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters.heuristic import is_sequential_string
from detect_secrets.plugins import keyword
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin

from mtl_graph.experience.secret_rules import (
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
_SECRET_TALK = re.compile(r"(?i)secret|token|passw|api.?key|private|credential|auth(?!or)")
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


def _locate(line: str, value: str) -> Iterator[tuple[int, int]]:
    """Every occurrence of value in line that starts a token; a match cut short by a fixed-length regex is
    extended to the end of its token so no tail of the secret survives."""
    start = line.find(value)
    while start >= 0:
        before = line[start - 1] if start else " "
        # A value glued to a letter run of the same class is the tail of a longer token (a hash, a word).
        if not (before.isalnum() or before == "_") or before.isdigit() != value[0].isdigit():
            end = start + len(value)
            if value[-1].isalnum():
                end += _TOKEN_TAIL.match(line, end).end() - end
            yield start, end
        start = line.find(value, start + len(value))


def _clean(value: str) -> str:
    """Trim the delimiters and labels some detect-secrets regexes capture along with the secret."""
    value = value.strip().strip("\"'=:,")
    value = value.split()[0] if value.split() else ""
    return _LABEL.sub("", value)


def findings(text: str) -> Iterator[Finding]:
    """Secrets detect-secrets finds in text, as exact spans. The vendor patterns never cross a line, so they scan
    the whole text at once; the keyword and entropy detectors run on the lines that mention a secret."""
    vendor, detector, entropy = plugins()
    for plugin in vendor:
        name = type(plugin).__name__
        if _REQUIRES.get(name, "") not in text:
            continue
        prefixed = name in _PREFIXED
        for value in {_clean(raw) for raw in plugin.analyze_string(text)}:
            if len(value) < 8 or (not prefixed and not looks_random(value)):
                continue
            # Keyword-anchored plugins (IBM, Cloudant, ...) rank with our assignment rules: the longer span names it.
            for start, end in _locate(text, value):
                yield Finding(start, end, kind_for(plugin.secret_type), VENDOR if prefixed else CONTEXT)
    offset = 0
    for line in text.split("\n"):
        if detector is not None and _KEYWORD_HINT.search(line):
            yield from _shifted(_keyword_findings(line), offset)
        if _SECRET_TALK.search(line):
            yield from _shifted(_entropy_findings(line, entropy), offset)
        offset += len(line) + 1


def _shifted(found: Iterator[Finding], offset: int) -> Iterator[Finding]:
    for f in found:
        yield f._replace(start=f.start + offset, end=f.end + offset)


def _keyword_findings(line: str) -> Iterator[Finding]:
    for regex, group in _KEYWORD_REGEXES.items():
        for m in regex.finditer(line):
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


def _entropy_findings(line: str, detectors: list[HighEntropyStringsPlugin]) -> Iterator[Finding]:
    for plugin in detectors:
        for m in plugin.regex.finditer(line):
            value = m.group(2)
            if (len(value) >= _ENTROPY_MIN_LENGTH and plugin.calculate_shannon_entropy(value) > plugin.entropy_limit
                    and looks_random(value) and not is_checksum_or_id(value) and not is_sequential_string(value)):
                yield Finding(m.start(2), m.end(2), "high_entropy", ENTROPY)
