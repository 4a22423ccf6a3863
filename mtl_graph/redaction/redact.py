"""Secret redaction on a maintained rule set: detect-secrets' plugins plus our own context rules.

Every text that enters or leaves a run (distillation prompts, the judge, the pool, `mtl memories add/import`, run
logs) passes through a `Redactor` first. Only the secret itself becomes ``[REDACTED:<kind>]``; names, quotes and
separators stay (``DB_PASSWORD=[REDACTED:password]``, ``password = "[REDACTED:password]"``), so the memory still
says *that* a password was set and code stays valid code. Look-alikes survive: git SHAs, UUIDs, checksums, base64
test constants, paths, identifiers, `$VAR` / `getenv(...)` references and placeholder values like ``'changeme'``.

Where each finding comes from: `secret_detectors` (Yelp's detect-secrets vendor, keyword and entropy plugins),
`secret_rules` (assignment syntaxes, URLs, headers, command flags, private key blocks and the vendor formats
detect-secrets lacks), `secret_shapes` (URL users, webhook paths, query signatures, positional passwords, .pgpass)
and `secret_encoded` (base64 values decoded and scanned again). `secret_catalog` lists every rule with the triggers
of the one combined pre-scan (`secret_prescan`) that picks the lines each rule runs on. Overlapping findings
merge; the most specific rule names the kind.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import Counter, OrderedDict
from functools import partial
from typing import Any, Iterable, Iterator, Protocol, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mtl_graph.redaction.catalog import catalog
from mtl_graph.redaction.prescan import Prescan, Rule, Span, finditer, trigger
from mtl_graph.redaction.rules import (
    CONTEXT, ENTROPY, Finding, is_checksum_or_id, is_reference_or_placeholder, looks_random,
)
from mtl_graph.redaction.words import is_readable_phrase
from mtl_graph.core.trajectory import Trajectory



class Redactable(Protocol):
    """What redaction needs of a memory (any `mtl_graph.memory` format): its content fields, those that quote the
    task the agent was given, its data, and a copy validated from new data. A protocol, so redaction stays below the memory package that uses it."""

    def content_fields(self) -> dict[str, Any]: ...

    def given_fields(self) -> frozenset[str]: ...

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]: ...

    @classmethod
    def model_validate(cls, obj: Any) -> Any: ...


MemoryT = TypeVar("MemoryT", bound=Redactable)

MARK = "[REDACTED:{kind}]"
_NAME_SEPARATORS = re.compile(r"[._-]")
_ESCAPED_BREAK = re.compile(r"\\[nrt\"]")
_ESCAPE = re.compile(r"\\[nrt\"]")
# A whole `NAME=value` line (an env dump, a .env file): a random-looking value is a secret whatever its name.
_ENV_LINE = re.compile(r"(?m)^[ \t]*(?:export[ \t]+)?[A-Za-z_][A-Za-z0-9_]*="
                       r"[\"']?(?P<value>[A-Za-z0-9+/=_.-]+)[\"']?[ \t]*\r?$")
_ENV_TRIGGER = r"^[ \t]*(?:export[ \t]+)?[A-Za-z_][A-Za-z0-9_]*=[\"']?[A-Za-z0-9+/=_.-]{%d}"
_MAX_DEPTH = 2  # base64 inside base64 inside a log: deeper encodings are not decoded
_MEMO_MIN = 256  # shorter texts cost less to redact again than to look up
_MEMO_SIZE = 65_536


class CleanTexts:
    """Texts that came out of a redactor with one configuration (by digest): redacting them again changes nothing
    (redaction is idempotent), so a text the pipeline redacted once (a run's observation, copied into its
    trajectory memory and then written to the pool) is not scanned again. Only the redactor's own output enters:
    a text edited afterwards, or built from redacted pieces, has another digest and is scanned. Output redacted as
    given text (where a readable example password stays) is clean only as given text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._digests: OrderedDict[bytes, bool] = OrderedDict()  # digest -> clean as ordinary text too
        self.scans = 0
        """Texts of at least _MEMO_MIN characters scanned (tests count them: each is scanned once)."""

    @staticmethod
    def _digest(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def known(self, text: str, given: bool) -> bool:
        digest = self._digest(text)
        with self._lock:
            anywhere = self._digests.get(digest)
            if anywhere is None or not (anywhere or given):
                self.scans += 1
                return False
            self._digests.move_to_end(digest)
            return True

    def add(self, text: str, given: bool) -> None:
        digest = self._digest(text)
        with self._lock:
            self._digests[digest] = self._digests.get(digest, False) or not given
            self._digests.move_to_end(digest)
            if len(self._digests) > _MEMO_SIZE:
                self._digests.popitem(last=False)


_CLEAN: dict[str, CleanTexts] = {}
_CLEAN_LOCK = threading.Lock()


def clean_texts(config: "RedactionConfig", fast: bool = True) -> CleanTexts:
    """The clean texts of every redactor with this configuration in the process (the pool's and ingest's); the
    full-scan reference path keeps its own, so comparing it with the fast path always scans."""
    key = f"{fast}:{config.model_dump_json()}"
    with _CLEAN_LOCK:
        return _CLEAN.setdefault(key, CleanTexts())


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
    """Replaces secrets in text with [REDACTED:<kind>] markers; idempotent.

    `fast` (the default) runs one combined pre-scan first and each rule only on the lines it may match
    (`secret_prescan`); `fast=False` runs every rule over the whole text (the reference the fast path is tested
    against, and the baseline of benchmarks/redaction.py). Both find the same secrets."""

    def __init__(self, config: RedactionConfig | None = None, *, fast: bool = True, engine: str = "auto",
                 _depth: int = 0) -> None:
        self.config = config or RedactionConfig()
        self.fast, self._engine, self._depth = fast, engine, _depth
        extra = [Rule(f"extra:{kind}", partial(_pattern_findings, kind, re.compile(p)))
                 for kind, p in self.config.extra_patterns.items()]
        self.rules = [*catalog(self._secret_kind if _depth < _MAX_DEPTH else None),
                      Rule("env_line", self._env_findings, trigger(_ENV_TRIGGER % self.config.entropy_min_length)),
                      *extra]
        self._prescan = Prescan(self.rules, engine) if fast else None
        self._inner: Redactor | None = None
        self.clean = clean_texts(self.config, fast)
        """What this configuration's redactors already produced: not scanned again."""

    def redact(self, text: str, *, given: bool = False) -> str:
        """Return text with every secret replaced by its marker and nothing else changed.

        given: text the agent was given (a task's instructions), where a password written as readable words
        (`password: "open sesame"`) is an example to work with, not a leak; tokens, keys and random passwords
        are redacted there as anywhere."""
        if not text or not self.config.enabled:
            return text
        long = len(text) >= _MEMO_MIN
        if long and self.clean.known(text, given):
            return text
        found = self.findings(text)
        if given:
            found = (f for f in found if not _is_example(text, f))
        spans = _merge(found)
        out = text if not spans else self._marked(text, spans)
        if long:
            self.clean.add(out, given)
        return out

    @staticmethod
    def _marked(text: str, spans: list[tuple[int, int, str]]) -> str:
        out, pos = [], 0
        for start, end, kind in spans:
            out += [text[pos:start], MARK.format(kind=kind)]
            pos = end
        out.append(text[pos:])
        return "".join(out)

    def findings(self, text: str) -> Iterator[Finding]:
        """Every secret span in text, from all rules (spans may overlap). Lines holding escaped line breaks (a JSON
        log or a quoted file inside an observation) are scanned a second time with them turned into real ones:
        the replacement keeps every offset, so the spans found there are spans of text."""
        yield from self._findings(text)
        for start, end in _escaped_runs(text):
            view = _ESCAPED_BREAK.sub(_unescape, text[start:end])
            yield from (f._replace(start=f.start + start, end=f.end + start) for f in self._findings(view))

    def _findings(self, text: str) -> Iterator[Finding]:
        if self._prescan is None:
            for rule in self.rules:
                yield from rule.scan(text, [(0, len(text))])
            return
        spans = self._prescan.spans(text)
        for r in sorted(spans):
            yield from self.rules[r].scan(text, spans[r])

    def _env_findings(self, text: str, spans: Sequence[Span]) -> Iterator[Finding]:
        """A whole `NAME=value` line (an env dump, a .env file) with a random-looking value, whatever its name."""
        for m in finditer(_ENV_LINE, text, spans):
            if self.is_high_entropy(m["value"]):
                yield Finding(m.start("value"), m.end("value"), "high_entropy", ENTROPY)

    def _secret_kind(self, text: str) -> str | None:
        """The kind of the most specific secret in text (decoded base64), or None."""
        if self._inner is None:
            self._inner = Redactor(self.config, fast=self.fast, engine=self._engine, _depth=self._depth + 1)
        best = max(self._inner.findings(text), key=lambda f: (f.priority, f.end - f.start), default=None)
        return best.kind if best is not None else None

    def is_high_entropy(self, value: str) -> bool:
        """A long, random-looking token that is not a checksum, a UUID, a path or a reference."""
        # The cheap tests first (all must hold; the order changes nothing but the cost).
        if len(value) < self.config.entropy_min_length or not looks_random(value):
            return False
        # Dotted and dashed names (unit files, hosts, pods, packages) are made of short words, keys of one long run.
        longest = max(_NAME_SEPARATORS.split(value), key=len)
        if len(longest) < 16 or not looks_random(longest):
            return False
        classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
        # Two alphabets only count when long: host and pod names (runner-5f7c9d8b6-x2x7q) are short.
        if classes < 2 or (classes == 2 and len(value) < 32):
            return False
        if is_checksum_or_id(value) or is_reference_or_placeholder(value):
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
        task = trajectory.task.model_copy(update={
            "instruction": r(trajectory.task.instruction, given=True), "metadata": rv(trajectory.task.metadata),
        })
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

    def redact_memory(self, memory: MemoryT) -> MemoryT:
        """memory with every content field redacted (provenance and stats kept); the fields that quote the task the
        agent was given are redacted as given text. One that held a secret gets the content id of its redacted
        text, so the leaky original's id never enters the pool."""
        content = memory.content_fields()
        given = memory.given_fields()
        clean = {k: self.redact(v, given=True) if k in given and isinstance(v, str) else self.redact_value(v)
                 for k, v in content.items()}
        if not self.config.enabled or clean == content:
            return memory
        return type(memory).model_validate({**memory.model_dump(mode="json"), **clean, "id": ""})


def _is_example(text: str, finding: Finding) -> bool:
    """A password found by its name whose value is readable words: the example of an exercise or a document."""
    return (finding.kind == "password" and finding.priority <= CONTEXT
            and is_readable_phrase(text[finding.start:finding.end]))


def _pattern_findings(kind: str, pattern: re.Pattern[str], text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    for m in finditer(pattern, text, spans):
        if m.end() > m.start():
            yield Finding(m.start(), m.end(), kind, CONTEXT)


def _escaped_runs(text: str) -> Iterator[Span]:
    """Spans of the runs of consecutive lines (line feeds included) that hold an escaped break or quote."""
    run: Span | None = None
    pos = 0
    while (m := _ESCAPE.search(text, pos)) is not None:
        start = text.rfind("\n", 0, m.start()) + 1
        pos = text.find("\n", m.end()) + 1 or len(text)
        if run is not None and run[1] == start:
            run = (run[0], pos)
        else:
            if run is not None:
                yield run
            run = (start, pos)
    if run is not None:
        yield run


def _unescape(m: re.Match[str]) -> str:
    """An escaped break or quote as a real line break, at the same length."""
    return '\n"' if m[0] == '\\"' else "\n "


def _merge(findings: Iterable[Finding]) -> list[tuple[int, int, str]]:
    """Disjoint (start, end, kind) spans in order: overlapping findings become one, named by the most specific."""
    clusters: list[tuple[int, int, Finding]] = []
    for f in sorted(findings):
        if clusters and f.start < clusters[-1][1]:
            start, end, best = clusters[-1]
            if (f.priority, f.end - f.start) > (best.priority, best.end - best.start):
                best = f
            clusters[-1] = (start, max(end, f.end), best)
        else:
            clusters.append((f.start, f.end, f))
    return [(start, end, best.kind) for start, end, best in clusters]


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


def redact_memory(memory: MemoryT) -> MemoryT:
    """Redact a memory's content with the default configuration (every write path into the pool calls this)."""
    return _DEFAULT.redact_memory(memory)
