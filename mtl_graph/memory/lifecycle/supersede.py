"""Superseded, not silently duplicated: a newer memory whose advice contradicts a near-duplicate older one.

When a memory is added, the pool looks for stored memories of the same format and outcome whose retrieval keys are
near duplicates of its own (cosine of the key vectors at least `SupersedeConfig.similarity`, the lifecycle's
near-copy threshold by default). For each, a check decides whether their advice conflicts:

- with a model (`SupersedeConfig` given one): one structured call (prompts/supersede.md) answers `conflict` and a
  reason; a model that gives no valid answer (malformed JSON, a refusal, a provider failure) is replaced by the
  rule for that pair, and the reason says so;
- otherwise the deterministic rule below.

On a conflict the older memory (by its latest source's `created_at`, then id: the same set of memories gives the
same links whatever order they arrive in) is marked `superseded_by` the newer, which lists it in `supersedes`. Both
are kept; retrieval with the lifecycle on serves the newer only; `mtl memories release OLDER` reverses it.

Who may supersede: a memory screening passed, not quarantined, archived or superseded itself. Who may be
superseded: any memory of the same namespace (the search runs through the pool's namespaced store) that is not
archived or already superseded. Trajectories are records of runs, not advice (every run of a task shares the
task as its key), so they neither supersede nor are superseded.

The rule (`rule_conflict`) holds by construction; it fires on exactly two shapes, and on nothing else:

1. **Opposite polarity of one statement.** Each text is cut into clauses (at . ; : ! ? , and "but"). A clause's
   polarity is the product of its negators ("not", "never", "don't", "avoid", "stop", "without", "skip", "forget",
   ...) and opposite actions ("unpin", "disable", "remove", "uninstall", "exclude", "deny", "decrease", "unset",
   "off", "hide" count -1 against "pin", "enable", "add", ...), its content the other words, stemmed, with
   opposite actions mapped onto one stem and fillers ("always", "should", "the", ...) dropped. Two clauses whose
   contents are the same statement (the same content words, two at least: `CLAUSE_OVERLAP`) and whose polarities
   differ conflict: "always run X" vs "never run X", "pin numpy" vs "unpin numpy".
   "Don't forget to run X" is +1 like "run X" (two negators).
2. **Different values of one setting.** A command flag with a value (`--timeout 30`, `--mode=strict`), a
   `name==version` / `NAME=value` assignment, "set NAME to VALUE", or a name followed by a dotted version
   (`python 3.11`, `node v20.1`): a setting named in both texts whose value sets are disjoint conflicts
   (`--timeout 30` vs `--timeout 300`). A setting only one text names is added detail, not a conflict.

What it therefore never does: supersede a paraphrase with the same polarity (synonyms, reordering, added detail,
case and punctuation), nor two pieces of advice about different actions on one thing ("never run X" / "always
check X"), which is what the generated pairs in tests/memory/lifecycle/test_supersede_rule.py check; and it
misses contradictions phrased in other words ("skip the tests" vs "run the tests", or a clause with added detail),
which is what the model check is for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.core.templates import render_template
from mtl_graph.memory.base import Memory, strings_of
from mtl_graph.memory.lifecycle.policy import LifecycleConfig

__all__ = ["CLAUSE_OVERLAP", "Conflict", "ConflictAnswer", "SupersedeConfig", "can_supersede", "check_conflict",
           "newer_of", "rule_conflict", "supersedable"]

CLAUSE_OVERLAP = 1.0
"""Jaccard of two clauses' content words at or above which they are one statement (polarity then decides): the
same words. Any lower lets one substituted word through, and the substituted word is often the action itself
("never run the pip cache" / "always cache the pip cache" share all but the verb), which polarity is about."""
NOT_ADVICE = {"trajectory"}
"""Formats that record runs rather than give advice: never part of a supersession."""

_NEGATORS = {"not", "never", "no", "don't", "dont", "doesn't", "doesnt", "didn't", "isn't", "aren't", "can't",
             "cannot", "won't", "shouldn't", "mustn't", "avoid", "avoiding", "stop", "stopped", "without", "skip",
             "skipping", "forget", "omit", "neglect", "nor", "neither", "refrain", "n't"}
"""Words that turn a clause's polarity ("do not run X" is -1 times "run X"; "don't forget to run X" is +1)."""
_OPPOSITES = {"unpin": "pin", "disable": "enable", "remove": "add", "uninstall": "install", "exclude": "include",
              "deny": "allow", "forbid": "allow", "disallow": "allow", "decrease": "increase", "unset": "set",
              "unlock": "lock", "off": "on", "hide": "show", "unmount": "mount", "downgrade": "upgrade",
              "disconnect": "connect", "deactivate": "activate", "unload": "load"}
"""Opposite actions: the negative word (its stem) -> the positive one, which both map onto as content."""
_FILLERS = {"a", "an", "the", "to", "of", "in", "at", "for", "by", "with", "and", "or", "it", "its", "this",
            "that", "these", "those", "is", "are", "be", "been", "was", "were", "do", "does", "did", "always",
            "should", "must", "please", "you", "your", "we", "our", "any", "every", "all", "just", "only", "also",
            "then", "so", "as", "use", "using", "when", "if", "can", "will", "would", "may", "make", "sure", "ever",
            "instead", "first", "there", "i", "one", "own", "from", "into", "up", "yes"}
"""Words that carry no statement of their own (dropped from a clause's content; "on" is kept as an action)."""
_CLAUSE = re.compile(r"[.;:!?,\n]+(?:\s|$)|\s+but\s+|\s+(?:however|whereas)\s+")
_WORD = re.compile(r"--?[a-z0-9][\w.-]*|[a-z0-9_]+(?:['.][a-z0-9_]+)*")

_FLAG_NUMBER = re.compile(r"(?<![\w-])(--?[a-z][\w-]*)(?:=|\s+)(\d+(?:\.\d+)*[a-z]*)\b")
_FLAG_EQUALS = re.compile(r"(?<![\w-])(--?[a-z][\w-]*)=([^\s,;'\"`)]+)")
_ASSIGN = re.compile(r"(?<![\w-])([a-z_][\w.-]*?)\s*==?\s*(\d[\w.]*|[a-z_][\w.-]*)")
_SET_TO = re.compile(r"\bset\s+(?:the\s+)?([a-z_][\w.-]*)\s+to\s+([\w.-]+)")
_VERSION = re.compile(r"\b([a-z][a-z0-9_+-]*?)(?:\s+version)?\s*v?(\d+\.\d+(?:\.\d+)*)\b")


@dataclass(frozen=True)
class Conflict:
    """Why two memories' advice conflicts: which check said so (rule or model) and what it found."""

    by: str
    """"rule", "model", or "rule (model gave no valid answer: ...)"."""
    reason: str
    """The conflict in a line (the two clauses, or the setting and its two values, or the model's reason)."""

    def line(self) -> str:
        return f"{self.by}: {self.reason}"


class ConflictAnswer(BaseModel):
    """What the model answers about two memories."""

    model_config = ConfigDict(extra="forbid")

    conflict: bool
    """True when following one memory means going against the other."""
    reason: str = Field(min_length=1, max_length=300)
    """One sentence: the conflicting advice, or why they agree."""


class SupersedeConfig(BaseModel):
    """How the write path decides that a new memory supersedes a stored one."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, use_attribute_docstrings=True)

    enabled: bool = True
    """Look for supersessions at all (False: the write path stores memories as before)."""
    similarity: float = Field(default=LifecycleConfig.model_fields["near_copy"].default, ge=0.5, le=1.0)
    """Cosine of the key vectors at or above which two memories are near duplicates (the lifecycle's near_copy)."""
    candidates: int = Field(default=5, ge=1, le=50)
    """Nearest stored memories of the same format and outcome checked per new memory."""
    model: Any = None
    """A chat model (or "provider:model") that decides each near-duplicate pair; None: the deterministic rule."""
    max_attempts: int = Field(default=2, ge=1, le=5)
    """Model calls per pair before the rule decides it instead."""


# ------------------------------------------------------------------ the rule
def _stem(word: str) -> str:
    """A crude, stable stem: -ing / -ed / -s, a doubled last consonant and a final e dropped ("pinned" -> "pin",
    "added" and "add" -> "ad"): the same for a word's inflections, which is all a clause comparison needs."""
    if word.startswith("-") or any(c.isdigit() for c in word):
        return word
    if word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


_FILLER_STEMS = {_stem(w) for w in _FILLERS}
# a negative word's inflections ("disabled", "removing"); a stem that is also a filler's ("off" and "of") is
# matched by the whole word only
_NEGATIVE_STEMS = {_stem(w): _stem(p) for w, p in _OPPOSITES.items() if _stem(w) not in _FILLER_STEMS}
_NEGATOR_STEMS = {_stem(w) for w in _NEGATORS if "'" not in w} - _FILLER_STEMS


def _words(text: str) -> list[str]:
    text = text.casefold().replace("\u2019", "'").replace("`", " ")
    text = re.sub(r"(\w)n't\b", r"\1 n't", text)  # "doesn't" and "don't" alike: a negator word of their own
    return _WORD.findall(text)


@dataclass(frozen=True)
class _Clause:
    text: str
    polarity: int
    content: frozenset[str]


def clauses(text: str) -> list[_Clause]:
    """The clauses of a text with their polarity and content words (see the module docstring)."""
    out = []
    for part in _CLAUSE.split(text.casefold()):
        polarity, content = 1, set()
        for word in _words(part):
            stem = _stem(word)
            if word in _NEGATORS or stem in _NEGATOR_STEMS:
                polarity = -polarity
            elif word in _OPPOSITES:
                polarity = -polarity
                content.add(_stem(_OPPOSITES[word]))
            elif stem in _NEGATIVE_STEMS:
                polarity = -polarity
                content.add(_NEGATIVE_STEMS[stem])
            elif stem not in _FILLER_STEMS:
                content.add(stem)
        if content:
            out.append(_Clause(" ".join(part.split()), polarity, frozenset(content)))
    return out


def settings(text: str) -> dict[str, set[str]]:
    """The settings a text names with their values: flag values, assignments, "set X to V", versions."""
    text = text.casefold().replace("`", " ")
    found: dict[str, set[str]] = {}
    for pattern in (_FLAG_NUMBER, _FLAG_EQUALS, _ASSIGN, _SET_TO, _VERSION):
        for name, value in pattern.findall(text):
            name, value = name.rstrip(".-"), value.rstrip(".")
            if not name or _stem(name) in _FILLER_STEMS or name in {"v", "version"}:
                continue
            found.setdefault(name, set()).add(value.removeprefix("v") if pattern is _VERSION else value)
    return found


def rule_conflict(newer: str, older: str) -> Conflict | None:
    """The deterministic rule on two advice texts: a conflict, or None when they agree (module docstring)."""
    new_settings, old_settings = settings(newer), settings(older)
    for name in sorted(new_settings.keys() & old_settings.keys()):
        if not new_settings[name] & old_settings[name]:
            return Conflict("rule", f"{name} is {'/'.join(sorted(new_settings[name]))} in the newer memory and "
                                    f"{'/'.join(sorted(old_settings[name]))} in the older")
    old_clauses = clauses(older)
    for new in clauses(newer):
        for old in old_clauses:
            shared = new.content & old.content
            if len(shared) < 2 or len(shared) / len(new.content | old.content) < CLAUSE_OVERLAP:
                continue
            if new.polarity != old.polarity:
                return Conflict("rule", f"{new.text[:120]!r} contradicts {old.text[:120]!r}")
    return None


# ------------------------------------------------------------------ the pair and its check
def advice_text(memory: Memory) -> str:
    """What a memory advises: its content fields' text, one field a line."""
    return "\n".join(strings_of(memory.content_fields()))


def latest(memory: Memory) -> datetime:
    return max((s.created_at for s in memory.sources), default=datetime.min.replace(tzinfo=timezone.utc))


def newer_of(a: Memory, b: Memory) -> tuple[Memory, Memory]:
    """(newer, older): by the latest source's created_at, then by id (the same pair orders alike whatever arrives
    first)."""
    return (a, b) if (latest(a), a.id) > (latest(b), b.id) else (b, a)


def can_supersede(memory: Memory) -> bool:
    """Screened clean (or released), served: a flagged, quarantined, archived or superseded memory supersedes
    nothing."""
    return memory.type not in NOT_ADVICE and not (memory.flagged or memory.quarantined or memory.archived or
                                                  memory.superseded_by)


def supersedable(memory: Memory) -> bool:
    """Still in the running: not archived, not superseded already, advice rather than a run's record."""
    return memory.type not in NOT_ADVICE and not (memory.archived or memory.superseded_by)


def _messages(newer: Memory, older: Memory) -> list[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage

    from mtl_graph.memory.fence import fence_memories

    fenced = fence_memories([older, newer], observation_chars=300)
    prompt = render_template("mtl_graph.memory.lifecycle", "supersede", boundary=fenced.boundary,
                             memories=fenced.text)
    return [SystemMessage(render_template("mtl_graph.memory.lifecycle", "supersede_system")), HumanMessage(prompt)]


def check_conflict(newer: Memory, older: Memory, config: SupersedeConfig) -> Conflict | None:
    """Whether newer's advice conflicts with older's: the model's answer when one is configured and answers, the
    rule otherwise (a model without a valid answer never stops the write: the rule decides that pair)."""
    if config.model is None:
        return rule_conflict(advice_text(newer), advice_text(older))
    from mtl_graph.llm.chat import chat_model
    from mtl_graph.llm.structured import StructuredCallError, structured_call

    try:
        answer = structured_call(chat_model(config.model), ConflictAnswer, _messages(newer, older),
                                 max_attempts=config.max_attempts).value
    except StructuredCallError as exc:
        found = rule_conflict(advice_text(newer), advice_text(older))
        why = " ".join(str(exc.errors[-1] if exc.errors else exc).split())[:120]
        return None if found is None else Conflict(f"rule (model gave no valid answer: {why})", found.reason)
    return Conflict("model", " ".join(answer.reason.split())) if answer.conflict else None
