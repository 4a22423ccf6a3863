"""The pre-scanned fast path redacts exactly what the full path (every rule over the whole text) does.

Checked per rule, not only on the output: for every rule, the findings it makes on the lines the pre-scan gives
it equal the findings it makes on the whole text, on the generated secret corpus, the look-alikes, generated agent
logs and hostile text (non-ASCII, case-folded letters, escaped JSON, line-break variants). No timing here: speed is
measured by benchmarks/redaction.py.
"""

from __future__ import annotations

import json
import random
import threading

import pytest
from helpers.agent_log import agent_log
from helpers.secret_corpus import secret_cases
from helpers.secret_corpus_kube import round_three_cases, round_three_look_alikes
from helpers.secret_look_alikes import look_alikes

from mtl_graph.redaction import prescan as secret_prescan
from mtl_graph.redaction.redact import Redactor
from mtl_graph.redaction.prescan import Prescan, Rule, trigger

FAST, FULL = Redactor(), Redactor(fast=False)
ENGINES = ["re"] + (["hyperscan"] if secret_prescan.hyperscan is not None else [])


def corpus_texts(seeds: range) -> list[str]:
    texts = []
    for seed in seeds:
        texts += [c.text for c in secret_cases(seed)] + [item.text for item in look_alikes(seed)]
        texts += [c.text for c in round_three_cases(seed)[::10]] + [item.text for item in round_three_look_alikes(seed)[::2]]
    return texts


def hostile_variants(text: str, rng: random.Random) -> list[str]:
    """The same text as a JSON log line, with CRLF, glued to other lines, in non-ASCII surroundings, with Unicode
    digits and accented letters in place of ASCII ones (what `\\d` and `\\w` match on `str`), and with the letters
    Python folds onto ASCII under IGNORECASE (ſ for s, K for k, İ/ı for i)."""
    folded = text.replace("s", "\u017f", 1).replace("k", "\u212a", 1).replace("i", "\u0131", 1)
    arabic_digits = text.translate(str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669"))
    letters = text.translate(str.maketrans("aeo", "\u00e4\u00e9\u00f6"))
    return [json.dumps({"observation": text}), text.replace("\n", "\r\n"), f"é{text}ü\n日本語 {text}",
            folded, arabic_digits, letters, text.replace(" ", "\u00a0", 2), f"{text}\n" * 3,
            text[: rng.randrange(len(text) + 1)], "\ud800 " + text]


def assert_same_per_rule(redactor: Redactor, text: str) -> None:
    spans = redactor._prescan.spans(text)
    for r, rule in enumerate(redactor.rules):
        full = sorted(rule.scan(text, [(0, len(text))]))
        fast = sorted(rule.scan(text, spans[r])) if r in spans else []
        assert fast == full, (rule.name, text[:300])


@pytest.mark.parametrize("engine", ENGINES)
def test_every_rule_finds_the_same_on_its_lines(engine: str) -> None:
    redactor = Redactor(engine=engine)
    rng = random.Random(5)
    texts = corpus_texts(range(3))
    for text in texts:
        assert_same_per_rule(redactor, text)
    for text in texts[::3]:
        for variant in hostile_variants(text, rng):
            assert_same_per_rule(redactor, variant)


def test_fast_path_redacts_exactly_what_the_full_path_does() -> None:
    rng = random.Random(9)
    texts = corpus_texts(range(4))
    texts += [variant for text in texts[::5] for variant in hostile_variants(text, rng)]
    texts.append(json.dumps([{"step": i, "observation": t} for i, t in enumerate(texts[:200])]))
    differ = [t[:120] for t in texts if FAST.redact(t) != FULL.redact(t)]
    assert not differ
    assert sum(FAST.redact(t) != t for t in texts) > len(texts) // 3  # the check compared real redactions


@pytest.mark.parametrize("mix", ["realistic", "adversarial"])
def test_fast_path_on_generated_agent_logs(mix: str) -> None:
    log = agent_log(60_000, seed=3, mix=mix)
    fast = FAST.redact(log)
    assert fast == FULL.redact(log) and fast.count("[REDACTED:") >= 2


def test_both_engines_pick_the_same_lines() -> None:
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan has no wheel for this platform: only the re engine runs")
    log = agent_log(60_000, seed=4, mix="adversarial") + "\nſecret_k\u212aey: 'x' é\n"
    rules = FAST.rules
    assert Prescan(rules, "hyperscan").spans(log) == Prescan(rules, "re").spans(log)


def test_a_rule_runs_only_where_its_trigger_fires() -> None:
    seen: list[str] = []

    def scan(text, spans):
        seen.extend(text[a:b] for a, b in spans)
        return iter(())

    rule = Rule("probe", scan, trigger("needle"), after=1)
    text = "a\nhay needle hay\nnext line\nfar away\nneedle at the end"
    spans = Prescan([rule]).spans(text)
    list(rule.scan(text, spans[0]))
    assert seen == ["hay needle hay\nnext line\n", "needle at the end"]
    assert Prescan([rule]).spans("no match here\n") == {}


def test_rules_without_triggers_scan_the_whole_text() -> None:
    redactor = Redactor()
    extra = Redactor(redactor.config.model_copy(update={"extra_patterns": {"ticket": r"TCK-\d{6}(?:\n\d+)?"}}))
    text = "x\nowner TCK-123456\n42 done"
    assert extra.redact(text) == Redactor(extra.config, fast=False).redact(text) == "x\nowner [REDACTED:ticket] done"


@pytest.mark.parametrize("text", ["", "\n", "\n\n\n", "\r\n", "é", "\ud800", "a" * 100_000, "\n" * 10_000,
                                  "password=" * 2000, "://" * 3000 + "@", "-----BEGIN RSA PRIVATE KEY-----\n" * 50,
                                  # Unicode digits where a rule reads \d, a percent-encoded name in a query
                                  "Private-Lines: \u0663\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldY\n", "x AP\u0663bcdefgh12 y",
                                  "GET /x?%6Bey=" + "aB3" * 10 + " ok"])
def test_odd_texts_agree(text: str) -> None:
    assert FAST.redact(text) == FULL.redact(text)


def test_threads_redact_at_once() -> None:
    """Graph nodes and event writers redact from several threads: each scan has its own scratch space."""
    log = agent_log(40_000, seed=6, mix="adversarial")
    expected, results = FULL.redact(log), []

    def work() -> None:
        results.extend(FAST.redact(log) for _ in range(3))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 18 and all(r == expected for r in results)


def test_an_unknown_engine_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="not one of auto, hyperscan, re"):
        Redactor(engine="pcre")
