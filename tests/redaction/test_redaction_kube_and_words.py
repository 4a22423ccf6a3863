"""Redaction, third round: secrets hidden in Kubernetes Secrets and kubeconfigs, webhook URLs, and the look-alikes
that must stay (identifiers made of English words, example values in exercise text).

The cases are generated (tests/helpers/secret_corpus_kube.py); MTL_REDACTION_SEED picks another draw.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import string
import textwrap

import pytest
from helpers.secret_corpus import UPPER_ALNUM, URLSAFE, Gen, SecretCase
from helpers.secret_corpus_kube import (
    PROGRAMMING_WORDS, exercise_example_look_alikes, given_text_examples, kube_secret_cases, kubeconfig_cases,
    round_three_cases, round_three_look_alikes, webhook_cases, word_identifier, word_identifier_look_alikes,
)

from mtl_graph.core.task import TaskRef
from mtl_graph.core.trajectory import Step, Trajectory
from mtl_graph.memory.formats.reasoningbank import ReasoningBankMemory
from mtl_graph.memory.formats.trajectory import TrajectoryMemory
from mtl_graph.redaction.redact import Redactor, redact, redact_memory, redact_trajectory
from mtl_graph.redaction.rules import looks_random
from mtl_graph.redaction.words import is_readable_phrase, is_word_identifier

SEED = int(os.environ.get("MTL_REDACTION_SEED", "7"))
CASES = round_three_cases(SEED)
SAFE = round_three_look_alikes(SEED)
MARKER = re.compile(r"\[REDACTED:[\w-]+\]")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def exact(case: SecretCase, out: str) -> bool:
    """No secret left and nothing but the secrets changed."""
    expected = case.text
    for secret in case.secrets:
        expected = expected.replace(secret, "")
    return not any(s in out for s in case.secrets) and MARKER.sub("", out) == expected


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_secret_is_redacted_exactly(case: SecretCase) -> None:
    out = redact(case.text)
    assert exact(case, out), out
    if case.kind:
        assert f"[REDACTED:{case.kind}]" in out, out
    assert redact(out) == out


@pytest.mark.parametrize("item", SAFE, ids=[s.id for s in SAFE])
def test_look_alike_is_kept(item) -> None:
    assert redact(item.text) == item.text


def test_totals_over_draws() -> None:
    """Five draws: every secret of every corpus shape inside a Secret goes, every look-alike stays."""
    leaked = damaged = secrets = kept = 0
    for seed in range(5):
        for case in round_three_cases(seed):
            secrets += 1
            leaked += not exact(case, redact(case.text))
        for item in round_three_look_alikes(seed):
            kept += 1
            damaged += redact(item.text) != item.text
    print(f"\nthird-round corpus x5: {secrets} cases, {leaked} leaked or damaged; {kept} look-alikes, {damaged} changed")
    assert (leaked, damaged) == (0, 0) and secrets > 1500


# --- the issue's own cases --------------------------------------------------------------------------------------------

def test_slack_webhook_in_a_secret_data_value() -> None:
    g = Gen(SEED)
    hook = f"https://hooks.slack.com/services/T{g.chars(UPPER_ALNUM, 10)}/B{g.chars(UPPER_ALNUM, 10)}/{g.b62(24)}"
    for text in (f"apiVersion: v1\nkind: Secret\ndata:\n  notify: {_b64(hook)}\n",
                 f"kind: Secret\nstringData:\n  notify: {hook}\n",
                 json.dumps({"kind": "Secret", "data": {"SLACK_WEBHOOK_URL": _b64(hook)}}),
                 f"data:\n  url: |\n    {_b64(hook)}\n"):
        out = redact(text)
        assert hook not in out and _b64(hook) not in out and "[REDACTED:slack_token]" in out, out


def test_spring_bean_identifier_stays() -> None:
    assert redact("SPRING_MAIN_BEAN=AbstractSingletonProxyFactoryBeanConfigurer2") == \
        "SPRING_MAIN_BEAN=AbstractSingletonProxyFactoryBeanConfigurer2"


def test_password_123_example_stays_and_a_real_password_goes() -> None:
    assert redact("password: 'PASSWORD 123'") == "password: 'PASSWORD 123'"
    secret = "hunter2xyz" + Gen(SEED).b62(8)
    assert redact(f'password = "{secret}"') == 'password = "[REDACTED:password]"'


# --- encoded values anywhere -------------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [64, 76])
def test_wrapped_base64_block_is_joined_and_scanned(width: int) -> None:
    token = f"ghp_{Gen(SEED).b62(36)}"
    encoded = _b64(f"machine github.com\n  login ci\n  password {token}\n")
    block = "\n".join(textwrap.wrap(encoded, width))
    out = redact(f"$ base64 ~/.netrc\n{block}\n$ echo done")
    assert out == "$ base64 ~/.netrc\n[REDACTED:github_token]\n$ echo done", out


def test_base64_of_readable_text_and_binary_stays_anywhere() -> None:
    rng = random.Random(SEED)
    texts = [f"- {_b64('replicas: 3 and image: nginx:1.25')}",
             f"$ kubectl get cm app -o jsonpath='{{.data.x}}'\n{_b64('hello world from the config map')}",
             "\n".join(textwrap.wrap(base64.b64encode(rng.randbytes(300)).decode(), 76)),
             json.dumps({"blobs": [base64.b64encode(rng.randbytes(40)).decode(), _b64("plain text, not a secret")]})]
    for text in texts:
        assert redact(text) == text, text


# --- inside a Secret ---------------------------------------------------------------------------------------------------

def test_secret_document_needs_kind_secret() -> None:
    """The same neutral-named token value is redacted in a Secret and kept in a ConfigMap or a plain YAML file."""
    value = Gen(SEED).password()
    secret = f"apiVersion: v1\ndata:\n  item: {_b64(value)}\nkind: Secret\nmetadata:\n  name: a\n"
    assert _b64(value) not in redact(secret)
    for kind in ("ConfigMap", "SecretProviderClass"):
        other = secret.replace("kind: Secret", f"kind: {kind}")
        assert redact(other) == other, kind
    two_docs = f"kind: Secret\ndata:\n  a: {_b64('eu-west-1')}\n---\nkind: ConfigMap\ndata:\n  item: {_b64(value)}\n"
    assert redact(two_docs) == two_docs


def test_secret_readable_values_stay() -> None:
    values = ["info", "eu-west-1", "5432", "admin", "db.internal", "v1.2.3-rc1", "true", "Summer Breeze",
              "replicas: 3\nport: 8080\n"]
    rows = "".join(f"  k{i}: {_b64(v)}\n" for i, v in enumerate(values))
    text = f"apiVersion: v1\nkind: Secret\ndata:\n{rows}type: Opaque\n"
    assert redact(text) == text


# --- identifiers made of words ---------------------------------------------------------------------------------------

def test_generated_word_identifiers_are_not_random() -> None:
    rng = random.Random(SEED)
    idents = [word_identifier(rng) for _ in range(2000)]
    missed = [i for i in idents if len(i) >= 16 and looks_random(i)]
    assert len(missed) <= len(idents) // 100, missed[:20]


@pytest.mark.parametrize("make", [
    lambda g: g.b62(g.rng.randint(16, 64)),
    lambda g: g.chars(string.ascii_lowercase + string.digits, g.rng.randint(16, 48)),
    lambda g: g.chars(UPPER_ALNUM, g.rng.randint(16, 40)),
    lambda g: g.chars(URLSAFE, g.rng.randint(20, 64)),
    lambda g: g.hex(g.rng.choice([32, 40, 64])),
    lambda g: f"AKIA{g.chars(UPPER_ALNUM, 16)}",
    lambda g: f"ghp_{g.b62(36)}",
    lambda g: g.jwt(),
    lambda g: g.b64(g.rng.randint(12, 64)),
    lambda g: g.password(),
], ids=["base62", "lower_digits", "upper_digits", "urlsafe", "hex", "aws", "github", "jwt", "base64", "password"])
def test_random_tokens_are_never_word_identifiers(make) -> None:
    g = Gen(SEED)
    tokens = [make(g) for _ in range(3000)]
    assert not [t for t in tokens if is_word_identifier(t)]


def test_real_secret_formats_still_redacted_beside_identifiers() -> None:
    g = Gen(SEED)
    rng = random.Random(SEED)
    for _ in range(200):
        ident = word_identifier(rng)
        secrets = {"aws_access_key": f"AKIA{g.chars(UPPER_ALNUM, 16)}", "github_token": f"ghp_{g.b62(36)}",
                   "jwt": g.jwt(), "high_entropy": g.b62(40)}
        text = "\n".join([f"APP_MAIN_CLASS={ident}"] + [f"VALUE_{i}={s}" for i, s in enumerate(secrets.values())])
        out = redact(text)
        assert f"APP_MAIN_CLASS={ident}" in out and not any(s in out for s in secrets.values()), out


def test_words_of_the_shipped_list_are_programming_words_too() -> None:
    """Most of our own programming words are read as words (the vocabulary, a suffix, a prefix or a compound)."""
    from mtl_graph.redaction.words import is_word

    assert sum(is_word(w) for w in PROGRAMMING_WORDS) >= len(PROGRAMMING_WORDS) * 0.95


# --- example values in task text -------------------------------------------------------------------------------------

@pytest.mark.parametrize("item", exercise_example_look_alikes(SEED), ids=lambda i: i.id)
def test_exercise_examples_stay_everywhere(item) -> None:
    assert redact(item.text) == item.text


def test_readable_password_examples_stay_only_in_given_text() -> None:
    redactor = Redactor()
    for text, phrase in given_text_examples(SEED):
        assert redactor.redact(text, given=True) == text
        assert phrase not in redactor.redact(text)  # the same line in a log is a leak


def test_given_text_still_loses_random_passwords_and_tokens() -> None:
    g = Gen(SEED)
    redactor = Redactor()
    for _ in range(50):
        password, token = g.password(), f"ghp_{g.b62(36)}"
        text = f'Deploy with password = "{password}" and GITHUB_TOKEN={token}; example: password = "open sesame"'
        out = redactor.redact(text, given=True)
        assert password not in out and token not in out and '"open sesame"' in out, out


def test_task_text_flows_into_memories_unchanged() -> None:
    """The instruction of a run and the memories keyed on it keep their examples; the steps are logs."""
    instruction = 'Write check(password) -> bool.\nExample: password = "open sesame" -> False; PASSWORD 123 -> False'
    run = Trajectory(task=TaskRef(id="t", instruction=instruction),
                     steps=[Step(action='export DB_PASS="open sesame"', observation="ok")])
    assert redact_trajectory(run).task.instruction == instruction
    memory = TrajectoryMemory(task=instruction, steps=[{"command": 'echo password="open sesame"'}])
    clean = redact_memory(memory)
    assert clean.task == instruction and "open sesame" not in clean.steps[0].command
    bank = ReasoningBankMemory(query=instruction, items=[{
        "title": "Check the password rules", "description": "Validate before use.",
        "content": 'The test logs password = "open sesame" in clear: never do that.'}])
    clean = redact_memory(bank)
    assert clean.query == instruction and "open sesame" not in clean.items[0].content


def test_readable_phrase_is_words_only() -> None:
    g = Gen(SEED)
    assert is_readable_phrase("open sesame") and is_readable_phrase("Summer Breeze 2024")
    assert not any(is_readable_phrase(f"{g.b62(6)} horse battery") for _ in range(200))
    assert not is_readable_phrase("sesame") and not is_readable_phrase("123 456")


def test_kubeconfig_certificates_stay_while_credentials_go() -> None:
    for case in kubeconfig_cases(SEED):
        out = redact(case.text)
        assert exact(case, out) and "certificate-authority-data: LS0t" in out, out


def test_webhook_kinds() -> None:
    for case in webhook_cases(SEED):
        assert f"[REDACTED:{case.kind}]" in redact(case.text), case.id


def test_kube_cases_cover_every_corpus_kind() -> None:
    kinds = {c.id.split("_", 2)[-1] for c in kube_secret_cases(SEED)}
    assert len(kinds) >= 130
    assert len(word_identifier_look_alikes(SEED)) >= 40


def test_shipped_word_list_is_what_the_tokenizer_vocabulary_gives() -> None:
    """data/words.txt is derived, not edited: regenerating it from the bundled tokenizer changes nothing."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "scripts" / "redaction_words.py"), "--check"], timeout=60)
    assert done.returncode == 0, "run python scripts/redaction_words.py to regenerate the word list"
