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

`screen(memory)` reads what the memory advises, not what it quotes (advice.py): a trajectory's task and its
commands' output are read only for prompt structure and overrides, an `rm` of a file the run wrote itself is
cleanup, and the hosts the task names are not outside addresses. Beside the rules, the semantic screen
(semantic.py) scores the embedding of each prose sentence the memory advises; its reason is
"semantic: ... (score S >= T)".
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Sequence

from mtl_graph.memory.base import Memory
from mtl_graph.memory.screening.advice import hosts_named, split, with_hosts_local, without_own_cleanup
from mtl_graph.memory.screening.normalize import views
from mtl_graph.memory.screening.languages import LANGUAGE_RULES
from mtl_graph.memory.screening.paraphrases import PARAPHRASE_RULES
from mtl_graph.memory.screening.prescan import trigger_scan
from mtl_graph.memory.screening.rules import RULES, Lines, Rule
from mtl_graph.memory.screening.semantic import default_screen

__all__ = ["RULES", "RULE_NAMES", "Rule", "released", "rescreened", "screen", "screen_many", "screen_rules",
           "screen_text"]

ALL_RULES: tuple[Rule, ...] = RULES + PARAPHRASE_RULES + LANGUAGE_RULES
RULE_NAMES = tuple(dict.fromkeys(rule.name for rule in RULES))


# What quoted text (a task, a command's output) is read for: what the model, shown it, would take as prompt
# structure or as an order to drop its instructions. Rules about actions read only what the memory advises.
QUOTED_RULE_NAMES = ("override_instructions", "impersonates_prompt")
QUOTED_RULES: tuple[Rule, ...] = tuple(rule for rule in ALL_RULES if rule.name in QUOTED_RULE_NAMES)


def _hits(text: str, rules: tuple[Rule, ...], fast: bool = True) -> dict[str, str]:
    """Each rule's reason by name, the first rule of a name that matches; `fast` runs the triggers in one combined
    pass (prescan.py) where they can, `fast=False` each rule's own scan (the reference the fast path is tested
    against). Both give the same hits."""
    if not text:
        return {}
    seen = views(text)
    readings = {"latin": Lines(seen.latin), "native": None if seen.ascii_only else Lines(seen.native)}
    found: dict[str, tuple[dict[int, list[int]] | None, frozenset[str] | None]] = {}
    for view, reading in readings.items():
        if reading is None or not fast:
            found[view] = (None, None)
        else:
            scan = trigger_scan(rules, view)
            found[view] = (scan.lines(reading.lowered, reading.lowered_lines, reading.starts),
                           scan.present(reading.lowered))
    hits: dict[str, str] = {}
    for r, rule in enumerate(rules):
        reading = readings[rule.view]
        if rule.name in hits or reading is None:
            continue
        lines, present = found[rule.view]
        if rule.matches(reading, lines.get(r) if lines is not None else None, present):
            hits[rule.name] = f"{rule.name}: {rule.reason}"
    return hits


def screen_text(text: str, *, fast: bool = True) -> list[str]:
    """The reasons ("rule: reason") text is held back, in table order; empty when it is clean. fast=False: every
    rule scans for itself (the reference path; same reasons)."""
    hits = _hits(text, ALL_RULES, fast)
    return [hits[name] for name in RULE_NAMES if name in hits]


def screen(memory: Memory) -> list[str]:
    """Screen a memory's content: rules (screen_rules) and the semantic screen (semantic.py)."""
    return screen_many([memory])[0]


def screen_many(memories: Sequence[Memory]) -> list[list[str]]:
    """Each memory's reasons: the rules', then the semantic screen's, every segment embedded in one batch."""
    by_rules = [screen_rules(m) for m in memories]
    semantic = default_screen()
    if semantic is None or not memories:
        return by_rules
    from mtl_graph.memory.engine.embeddings import local_embeddings  # the model the weights were trained on

    return [rules + extra for rules, extra in zip(by_rules, semantic.screen(memories, local_embeddings()))]


_SCREENED_SIZE = 16_384
_screened: OrderedDict[str, tuple[str, ...]] = OrderedDict()
_screened_lock = threading.Lock()


def screen_rules(memory: Memory, *, fast: bool = True) -> list[str]:
    """The rules' reasons: what a memory advises by every rule, what it quotes (advice.py) by QUOTED_RULES.

    The rules read the content alone and never change in a process, so each distinct content (by its content id,
    computed here, not the id the memory carries) is screened once: a memory added again, or distilled again
    from a repeated run, costs a hash. fast=False screens afresh with every rule scanning for itself (the
    reference path; same reasons)."""
    if not fast:
        return _screen_rules(memory, fast=False)
    key = memory.content_id()
    with _screened_lock:
        cached = _screened.get(key)
        if cached is not None:
            _screened.move_to_end(key)
            return list(cached)
    reasons = _screen_rules(memory)
    with _screened_lock:
        _screened[key] = tuple(reasons)
        if len(_screened) > _SCREENED_SIZE:
            _screened.popitem(last=False)
    return reasons


def _screen_rules(memory: Memory, fast: bool = True) -> list[str]:
    advice, given = split(memory)
    # the hosts of the task itself (the key of a format that quotes it), never of a command's output
    hosts = hosts_named([memory.key_text()]) if given else set()
    own = with_hosts_local(without_own_cleanup("\n".join(advice)), hosts)
    hits = {**_hits("\n".join(given), QUOTED_RULES, fast), **_hits(own, ALL_RULES, fast)}
    return [hits[name] for name in RULE_NAMES if name in hits]


def released(memory: Memory) -> Memory:
    """The memory re-admitted by a person: its reasons move from `flagged` to `released`."""
    return memory.model_copy(update={"released": sorted({*memory.released, *memory.flagged}), "flagged": []})


def rescreened(memory: Memory) -> list[str]:
    """The memory's screening reasons under the current rules, less those a person already released."""
    return [reason for reason in screen(memory) if reason not in memory.released]
