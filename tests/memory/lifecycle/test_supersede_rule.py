"""The deterministic supersession rule on generated pairs: every conflicting pair of the rule's shapes is found, no
rephrasing is taken for a conflict; precision and recall are measured per class (run with -s to see them)."""

from collections import Counter

import pytest

from helpers.supersede_pairs import conflicting, rephrasing
from mtl_graph.memory.lifecycle.supersede import clauses, rule_conflict, settings

CONFLICTS = conflicting()
REPHRASES = rephrasing()
BEYOND_THE_RULE = [  # contradictions in other words: the model check's job, measured here to say what the rule misses
    ("Always run the linter before committing.", "Never run the linter before committing large changes.",
     "added detail"),
    ("Prefer pip over conda for the build.", "Prefer conda over pip for the build.", "order"),
    ("Keep the lock file in git.", "Leave the lock file out of git.", "verb"),
    ("Build the docs with sphinx.", "Build the docs with mkdocs.", "other tool"),
]


def measured(pairs):
    found = Counter(k for old, new, k in pairs if rule_conflict(new, old) is not None)
    return found, Counter(k for _, _, k in pairs)


def test_the_generated_sets_are_large_and_cover_every_class():
    assert len(CONFLICTS) >= 600 and len(REPHRASES) >= 1000
    assert set(Counter(k for *_, k in CONFLICTS)) == {"negation", "opposite action", "different value"}
    assert set(Counter(k for *_, k in REPHRASES)) == {
        "synonym", "reordering", "added detail", "casing and punctuation", "double negative", "two prohibitions",
        "value written", "another action"}


def test_every_conflict_of_the_rules_shapes_is_found_and_no_rephrasing_supersedes():
    hits, total = measured(CONFLICTS)
    false, rephrased = measured(REPHRASES)
    recall = sum(hits.values()) / sum(total.values())
    precision = sum(hits.values()) / (sum(hits.values()) + sum(false.values()))
    print(f"\nrule on generated pairs: precision {precision:.3f}, recall {recall:.3f} "
          f"({sum(total.values())} conflicting, {sum(rephrased.values())} rephrasing pairs)")
    for kind in sorted(total):
        print(f"  conflict  {kind:24} {hits[kind]:4}/{total[kind]:4} found")
    for kind in sorted(rephrased):
        print(f"  rephrase  {kind:24} {false[kind]:4}/{rephrased[kind]:4} taken for a conflict")
    missed = [(o, n) for o, n, _ in CONFLICTS if rule_conflict(n, o) is None]
    wrong = [(o, n, rule_conflict(n, o).reason) for o, n, _ in REPHRASES if rule_conflict(n, o) is not None]
    assert not missed, missed[:5]
    assert not wrong, wrong[:5]


def test_the_rule_is_symmetric_so_the_order_memories_arrive_in_changes_nothing():
    for old, new, _ in [*CONFLICTS, *REPHRASES]:
        assert (rule_conflict(new, old) is None) == (rule_conflict(old, new) is None), (old, new)


def test_what_the_rule_misses_is_counted_not_hidden():
    caught = [k for old, new, k in BEYOND_THE_RULE if rule_conflict(new, old) is not None]
    print(f"\nrule on contradictions in other words: {len(caught)}/{len(BEYOND_THE_RULE)} found (model check's job)")
    assert caught == []  # documented: the rule fires only on its two shapes
    # "skip" is a negator, so "skip X" contradicts "do not skip X"; beside "run X" its words differ: missed
    assert rule_conflict("Skip the full test suite.", "Do not skip the full test suite.") is not None
    assert rule_conflict("Skip the full test suite.", "Always run the full test suite.") is None


@pytest.mark.parametrize("text, expected", [
    ("Run pytest --timeout 30 -n 4", {"--timeout": {"30"}, "-n": {"4"}}),
    ("use --mode=strict and numpy==1.26", {"--mode": {"strict"}, "numpy": {"1.26"}}),
    ("Set max_workers to 8.", {"max_workers": {"8"}}),
    ("Python 3.11, python3.11 and Python v3.11", {"python": {"3.11"}}),
    ("Use python 3.11 for tests and python 3.13 for the docs", {"python": {"3.11", "3.13"}}),
    ("Run the tests twice, then read the output.", {}),
])
def test_settings_are_read_with_their_values(text, expected):
    assert settings(text) == expected


def test_a_setting_with_a_value_in_common_or_named_once_is_not_a_conflict():
    both = "Use python 3.11 for tests and python 3.13 for the docs."
    assert rule_conflict(both, "Use python 3.13 for the docs.") is None
    assert rule_conflict("Run pytest --timeout 30 -x", "Run pytest -x") is None
    found = rule_conflict("Run pytest --timeout 300", "Run pytest --timeout 30")
    assert found is not None and "--timeout is 300 in the newer memory and 30 in the older" in found.reason


@pytest.mark.parametrize("text, polarity", [
    ("Run the tests", 1), ("Never run the tests", -1), ("Don't run the tests", -1), ("Avoid running the tests", -1),
    ("Don't forget to run the tests", 1), ("Never skip the tests", 1), ("Unpin numpy", -1),
    ("Do not unpin numpy", 1), ("Turn off the cache", -1), ("Build it without the cache", -1),
    ("The list of files", 1),  # "of" is not "off"
])
def test_clause_polarity(text, polarity):
    [clause] = clauses(text)
    assert clause.polarity == polarity


def test_an_added_prohibition_about_something_else_is_not_a_conflict():
    older = "Always run the linter before committing."
    newer = "Always run the linter before committing; do not run the formatter before committing."
    assert rule_conflict(newer, older) is None
    assert rule_conflict("Never run the linter before committing.", older) is not None
