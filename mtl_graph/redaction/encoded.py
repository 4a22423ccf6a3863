"""Base64 values that hide a secret: decoded and scanned again.

A Kubernetes `Secret`'s `data:` holds every value base64-encoded (`DATABASE_URL: cG9zdGdyZXM6Ly9...`), and a
kubeconfig's `client-key-data:` is a base64 PEM key; neither name says "secret", and base64 hides the value's own
shape. Any `name: <base64>` / `name=<base64>` value (YAML, JSON, env) that decodes to text is scanned again, as
the text itself and as `name=<text>`; when that finds a secret, the whole encoded value is redacted under the kind
found inside. Certificates, readable constants and binary data decode to nothing secret and stay.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Callable, Iterator, Sequence

from mtl_graph.redaction.prescan import CONTEXT, Finding, Span, finditer

ENCODED = re.compile(r"[:=][ \t]*[\"']?(?<![\w+/])(?P<value>[A-Za-z0-9+/]{16,}={0,2})(?![\w+/=])")
_NAME_BEFORE = re.compile(r"(?P<name>[\w.-]+)[\"']?[ \t]*\Z")
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


def encoded_findings(secret_kind: Callable[[str], str | None], text: str,
                     spans: Sequence[Span]) -> Iterator[Finding]:
    """Encoded values whose decoded text holds a secret; secret_kind(text) names the secret found in text, if any."""
    for m in finditer(ENCODED, text, spans):
        decoded = decode_text(m["value"])
        if decoded is None:
            continue
        kind = secret_kind(decoded)
        name = _NAME_BEFORE.search(text, max(m.start() - 100, 0), m.start())
        if kind is None and name is not None and "\n" not in decoded:
            kind = secret_kind(f"{name['name']}={decoded}")
        if kind is not None:
            yield Finding(m.start("value"), m.end("value"), kind, CONTEXT)
