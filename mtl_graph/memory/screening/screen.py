"""Write-time screening: memories that read like instructions to misbehave are flagged, not retrieved.

Every memory entering the pool (distilled by the graph or `mtl ingest`, added or imported with `mtl memories`)
passes `screen()`. A memory that matches a rule is still stored — nothing is lost and a person can look at it —
but with `flagged` set to the reasons, and search leaves it out unless asked (`include_flagged=True`);
`mtl memories release ID` re-admits one.

The text is normalised first (normalize.py: NFKC, invisible characters and variation selectors dropped,
look-alike letters folded by Unicode's confusables table, base64 / hex / percent-encoded / tag-character payloads
decoded and appended), then matched by one table of rules: the English and command-line ones (screen_rules.py),
paraphrased test tampering (screen_paraphrases.py), and their counterparts in Chinese, Japanese, Russian,
Spanish, French and German (screen_languages.py). Each rule has a name, the reason a user sees, and a pattern;
natural-language rules skip a negated match ("never delete the tests" is good advice, "delete the tests" is not)
and the test-tampering rules spare the agent's own temporary or scratch files.
"""

from __future__ import annotations

from mtl_graph.memory.base import Memory, strings_of
from mtl_graph.memory.screening.normalize import views
from mtl_graph.memory.screening.languages import LANGUAGE_RULES
from mtl_graph.memory.screening.paraphrases import PARAPHRASE_RULES
from mtl_graph.memory.screening.rules import RULES, Lines, Rule

__all__ = ["RULES", "RULE_NAMES", "Rule", "released", "rescreened", "screen", "screen_text"]

ALL_RULES: tuple[Rule, ...] = RULES + PARAPHRASE_RULES + LANGUAGE_RULES
RULE_NAMES = tuple(dict.fromkeys(rule.name for rule in RULES))


def screen_text(text: str) -> list[str]:
    """The reasons ("rule: reason") text is held back, in table order; empty when it is clean."""
    seen = views(text)
    readings = {"latin": Lines(seen.latin), "native": None if seen.ascii_only else Lines(seen.native)}
    hits: dict[str, str] = {}
    for rule in ALL_RULES:
        reading = readings[rule.view]
        if rule.name not in hits and reading is not None and rule.matches(reading):
            hits[rule.name] = f"{rule.name}: {rule.reason}"
    return [hits[name] for name in RULE_NAMES if name in hits]


def screen(memory: Memory) -> list[str]:
    """Screen every text field of a memory's content (task, steps, observations, advice ...)."""
    return screen_text("\n".join(strings_of(memory.content_fields())))


def released(memory: Memory) -> Memory:
    """The memory re-admitted by a person: its reasons move from `flagged` to `released`."""
    return memory.model_copy(update={"released": sorted({*memory.released, *memory.flagged}), "flagged": []})


def rescreened(memory: Memory) -> list[str]:
    """The memory's screening reasons under the current rules, less those a person already released."""
    return [reason for reason in screen(memory) if reason not in memory.released]
