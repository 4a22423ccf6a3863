"""Secret redaction: API keys, private keys, JWTs, URL credentials, secret assignments, high-entropy env values.

Every text that leaves a run (distillation prompts, the judge, the pool, run logs) passes through a
`Redactor` first. Matches become ``[REDACTED:<kind>]``; for assignments the name is kept
(``DB_PASSWORD=[REDACTED:password]``) so the memory still says *that* a password was set.
Patterns are deliberately anchored on vendor prefixes or on secret-like names: hashes in git logs, UUIDs and
base64 test data must survive, or memories lose the evidence they are made of.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mtl_graph.experience.trajectory import Trajectory

MARK = "[REDACTED:{kind}]"
_ALREADY = re.compile(r"^\[REDACTED:[\w-]+\]")

# (kind, pattern); order matters: specific vendor formats before the generic rules that could eat them.
_VENDOR_PATTERNS: list[tuple[str, str]] = [
    # An unterminated block (a cut observation) is redacted up to the end of its base64 lines.
    ("private_key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
                    r"(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:\s*[A-Za-z0-9+/=]{8,})*)"),
    ("anthropic_key", r"\bsk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{20,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}(?:T3BlbkFJ[A-Za-z0-9_-]{20,})?\b"),
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ("slack_webhook", r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+"),
    ("slack_token", r"\bxox[abposre]-(?:[A-Za-z0-9]+-){1,4}[A-Za-z0-9]+\b"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    ("google_oauth_token", r"\bya29\.[0-9A-Za-z_-]{20,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
]

_URL_CREDENTIALS = re.compile(r"(?P<pre>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^\s/:@\[]*):(?P<pw>[^\s/@]+)@")
_BEARER = re.compile(r"(?i)(?P<pre>\b(?:bearer|basic|token)\s+)(?P<value>(?=[A-Za-z._~+/-]*\d)[A-Za-z0-9._~+/-]{16,}=*)")
# Env-style names: upper case, ending in a secret-like word (MAX_TOKENS and SECRET_KEY_LENGTH are not secrets).
_SECRET_NAME = r"[A-Z0-9_]*(?:PASSWORD|PASSWD|TOKEN|SECRET|SECRET_KEY|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY|AUTH_KEY|CREDENTIALS?)"
_ENV_ASSIGN = re.compile(
    rf"(?P<pre>\b(?P<name>{_SECRET_NAME})\s*=\s*)(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s'\"]+)"
)
# Lower-case keys (JSON, YAML, code) only count with a quoted value: `password: str` is a type hint, not a secret.
_KEY_ASSIGN = re.compile(
    r"(?i)(?P<pre>[\"']?\b(?P<name>password|passwd|secret|client[_-]?secret|secret[_-]?key|api[_-]?key|"
    r"access[_-]?token|auth[_-]?token|refresh[_-]?token|token)[\"']?\s*[:=]\s*)(?P<value>\"[^\"\n]{3,}\"|'[^'\n]{3,}')"
)
_FLAG_ASSIGN = re.compile(r"(?P<pre>--(?P<name>password|passwd|token|api-key|secret)[= ])(?P<value>[^\s'\"-][^\s'\"]*)")
_ENV_LINE = re.compile(r"(?m)^(?P<pre>[ \t]*(?:export[ \t]+)?[A-Za-z_][A-Za-z0-9_]*=)(?P<value>[\"']?[A-Za-z0-9+/=_.-]+[\"']?)[ \t]*$")
_HEX_OR_UUID = re.compile(r"^(?:[0-9a-fA-F]+|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$")
_NOT_A_VALUE = re.compile(r"^(?:\$|<|%|\{\{|\[REDACTED|\*{3,}|(?:none|null|true|false)$)", re.IGNORECASE)


def _kind_of(name: str) -> str:
    upper = name.upper().replace("-", "_")
    for word, kind in (("PASSW", "password"), ("API_KEY", "api_key"), ("APIKEY", "api_key"), ("TOKEN", "token"),
                       ("CREDENTIAL", "credential")):
        if word in upper:
            return kind
    return "secret"


def shannon_entropy(text: str) -> float:
    """Bits per character of text's own character distribution."""
    if not text:
        return 0.0
    counts = Counter(text)
    return -sum(c / len(text) * math.log2(c / len(text)) for c in counts.values())


class RedactionConfig(BaseModel):
    """What the redactor looks for beyond the built-in patterns."""

    model_config = ConfigDict(extra="forbid")

    extra_patterns: dict[str, str] = Field(default_factory=dict)
    """kind -> regular expression; every match becomes [REDACTED:kind]."""
    entropy_min_length: int = Field(default=20, ge=8)
    """Shortest env-dump value checked for entropy."""
    entropy_threshold: float = Field(default=4.0, gt=0)
    """Bits per character at or above which an env-dump value counts as a secret."""
    enabled: bool = True
    """False turns redaction off (tests of other components, trusted corpora)."""

    @field_validator("extra_patterns")
    @classmethod
    def _compiles(cls, value: dict[str, str]) -> dict[str, str]:
        for kind, pattern in value.items():
            if not re.fullmatch(r"[\w-]+", kind):
                raise ValueError(f"redaction kind {kind!r} must be a word (letters, digits, _ or -)")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"redaction pattern for {kind!r} does not compile: {exc}") from None
        return value


class Redactor:
    """Replaces secrets in text with [REDACTED:<kind>] markers; idempotent."""

    def __init__(self, config: RedactionConfig | None = None) -> None:
        self.config = config or RedactionConfig()
        patterns = _VENDOR_PATTERNS + list(self.config.extra_patterns.items())
        self._patterns = [(kind, re.compile(p)) for kind, p in patterns]

    def redact(self, text: str) -> str:
        """Return text with every secret replaced."""
        if not text or not self.config.enabled:
            return text
        for kind, pattern in self._patterns:
            text = pattern.sub(MARK.format(kind=kind), text)
        text = _URL_CREDENTIALS.sub(lambda m: f"{m['pre']}{m['user']}:{MARK.format(kind='url_credentials')}@", text)
        text = _BEARER.sub(self._keep_prefix(lambda m: "bearer_token"), text)
        for assign in (_ENV_ASSIGN, _KEY_ASSIGN, _FLAG_ASSIGN):
            text = assign.sub(self._keep_prefix(lambda m: _kind_of(m["name"])), text)
        return _ENV_LINE.sub(self._entropy_sub, text)

    @staticmethod
    def _keep_prefix(kind_of: Callable[[re.Match[str]], str]) -> Callable[[re.Match[str]], str]:
        def sub(m: re.Match[str]) -> str:
            value = m["value"].strip("\"'")
            if not value or _NOT_A_VALUE.match(value) or _ALREADY.match(value):
                return m[0]
            return m["pre"] + MARK.format(kind=kind_of(m))

        return sub

    def _entropy_sub(self, m: re.Match[str]) -> str:
        value = m["value"].strip("\"'")
        if self.is_high_entropy(value):
            return m["pre"] + MARK.format(kind="high_entropy")
        return m[0]

    def is_high_entropy(self, value: str) -> bool:
        """A long, mixed-alphabet, high-entropy token that is not a hex hash or a UUID."""
        if len(value) < self.config.entropy_min_length or _HEX_OR_UUID.match(value) or _ALREADY.match(value):
            return False
        classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
        # Two alphabets only count when long: host and pod names (runner-5f7c9d8b6-x2x7q) are short.
        if classes < 2 or (classes == 2 and len(value) < 32):
            return False
        return shannon_entropy(value) >= self.config.entropy_threshold

    def redact_value(self, value: Any) -> Any:
        """Redact strings inside nested dicts/lists (tool-call arguments, metadata)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self.redact_value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.redact_value(v) for v in value]
        return value

    def redact_trajectory(self, trajectory: Trajectory) -> Trajectory:
        """A copy of trajectory with every free-text field redacted."""
        if not self.config.enabled:
            return trajectory
        r, rv = self.redact, self.redact_value
        task = trajectory.task.model_copy(
            update={"instruction": r(trajectory.task.instruction), "metadata": rv(trajectory.task.metadata)}
        )
        steps = [
            s.model_copy(update={
                "reasoning": r(s.reasoning) if s.reasoning else s.reasoning,
                "action": r(s.action),
                "args": rv(s.args),
                "observation": r(s.observation),
            })
            for s in trajectory.steps
        ]
        verdict = trajectory.verdict
        if verdict is not None:
            verdict = verdict.model_copy(update={"reason": r(verdict.reason)})
        return trajectory.model_copy(update={
            "task": task,
            "steps": steps,
            "submission": r(trajectory.submission) if trajectory.submission else trajectory.submission,
            "verdict": verdict,
        })


_DEFAULT = Redactor()


def redact(text: str) -> str:
    """Redact text with the default configuration."""
    return _DEFAULT.redact(text)


def redact_value(value: Any) -> Any:
    """Redact strings inside nested dicts/lists with the default configuration."""
    return _DEFAULT.redact_value(value)


def redact_trajectory(trajectory: Trajectory) -> Trajectory:
    """Redact a trajectory with the default configuration."""
    return _DEFAULT.redact_trajectory(trajectory)
