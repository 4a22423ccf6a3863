"""Redaction on what public agent runs hold: the look-alikes they were redacted for, as generated classes
(tests/helpers/secret_corpus_real_runs.py), and the secrets in the same syntaxes, which must still go.

MTL_REDACTION_SEED picks another draw.
"""

from __future__ import annotations

import os
import re

import pytest
from helpers.secret_corpus import SecretCase
from helpers.secret_corpus_real_runs import real_run_look_alikes, real_run_secrets

from mtl_graph.core.task import TaskRef
from mtl_graph.core.trajectory import Step, Trajectory
from mtl_graph.redaction.redact import redact, redact_trajectory
from mtl_graph.redaction.rules import is_example_phrase

SEED = int(os.environ.get("MTL_REDACTION_SEED", "7"))
SAFE = real_run_look_alikes(SEED)
SECRETS = real_run_secrets(SEED)
MARKER = re.compile(r"\[REDACTED:[\w-]+\]")


@pytest.mark.parametrize("item", SAFE, ids=[s.id for s in SAFE])
def test_real_run_look_alike_is_kept(item) -> None:
    assert redact(item.text) == item.text


@pytest.mark.parametrize("case", SECRETS, ids=[c.id for c in SECRETS])
def test_secret_in_the_same_syntax_goes(case: SecretCase) -> None:
    out = redact(case.text)
    assert not any(s in out for s in case.secrets), out
    assert f"[REDACTED:{case.kind}]" in out, out
    expected = case.text
    for secret in case.secrets:
        expected = expected.replace(secret, "")
    assert MARKER.sub("", out) == expected, out


def test_totals_over_draws() -> None:
    """Five draws of every class: every look-alike stays, every secret beside them goes."""
    changed = leaked = 0
    for seed in range(5):
        changed += sum(redact(item.text) != item.text for item in real_run_look_alikes(seed))
        leaked += sum(any(s in redact(c.text) for s in c.secrets) for c in real_run_secrets(seed))
    assert (changed, leaked) == (0, 0)


def test_a_test_run_printed_in_a_trajectory_keeps_its_verdicts() -> None:
    """A reproduction script's output as a step observation: the verdicts stay, a real key printed beside goes."""
    key = "sk_live_" + "Zq8" * 12
    output = ("PASS: Selection works\nExtents: (12.0, 15.0)\nPASS: Extents updated\n"
              "PASS: http://user%2f:pass@example.com was accepted\n"
              f"FAIL: frozen_app NOT loaded\nSTRIPE_SECRET_KEY={key}\n")
    run = Trajectory(task=TaskRef(id="t", instruction="Fix the validator."),
                     steps=[Step(action="python reproduce.py", observation=output)])
    assert redact_trajectory(run).steps[0].observation == output.replace(key, "[REDACTED:stripe]")


@pytest.mark.parametrize("value", ["some:password", "user:pass", "pass%40word", "secret1", "my-api-key",
                                   "test_token_2", "admin@password"])
def test_placeholder_words_joined_are_an_example(value: str) -> None:
    assert is_example_phrase(value)


@pytest.mark.parametrize("value", ["secret" + "Xq7Lm2Pz9K", "pass:" + "hunter2x", "correct:horse", "Summer2024!",
                                   "user:Zq8mW3", "42"])
def test_a_value_of_its_own_is_not_an_example(value: str) -> None:
    assert not is_example_phrase(value)
