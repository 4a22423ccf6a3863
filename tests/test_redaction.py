"""Redaction corpus: realistic secrets that must go, and look-alikes that must stay.

Secret-shaped strings are assembled from pieces so that this file itself never contains a scannable token.
"""

from __future__ import annotations

import base64
import uuid

import pytest
from pydantic import ValidationError

from mtl_graph.experience.redact import RedactionConfig, Redactor, redact, redact_trajectory, shannon_entropy
from mtl_graph.experience.trajectory import Step, Trajectory, Verdict, VerdictStatus
from mtl_graph.tasks import TaskRef


def j(*parts: str) -> str:
    return "".join(parts)


B62 = "Zq8Xv3Lm0Np7Rt2Ys5Wk9Hd4Fg6Jc1Bx"  # 32 mixed characters
OPENAI = j("sk-", "proj-", B62, "Qe7Tu3Io", "T3Blbk", "FJ", B62[:20])
OPENAI_LEGACY = j("sk-", B62, "Aa11Bb22")
ANTHROPIC = j("sk-", "ant-", "api03-", B62, B62, "-Qw3_Ab")
AWS_ID = j("AKIA", "Z7QW3ERT5YUI2OPL")
AWS_SECRET = j("wJalrXUtnFEMI", "/K7MDENG/bPxRfiCY", "ZQ8Xv3Lm0Np7")
GITHUB = j("gh", "p_", B62, "Ab12")
GITHUB_PAT = j("github", "_pat_", "11ABCDEFG0", "_", B62, B62[:20])
SLACK = j("xo", "xb-", "2945871263-", "5093814720381-", "Zq8Xv3Lm0Np7Rt2Ys5Wk9Hd4")
SLACK_HOOK = j("https://hooks.", "slack.com/services/", "T0A1B2C3D/", "B4E5F6G7H/", "Zq8Xv3Lm0Np7Rt2Ys5Wk9Hd4")
GOOGLE = j("AI", "za", "Sy", B62[:30], "_x1")
GOOGLE_OAUTH = j("ya", "29.", "a0AfH6SM", B62)
JWT = j("eyJ", "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", ".", "eyJ", "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ",
        ".", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
PEM = j("-----BEGIN ", "RSA PRIVATE KEY-----\n", "MIIEowIBAAKCAQEA", B62, "\n", B62, "\n-----END ",
        "RSA PRIVATE KEY-----")
OPENSSH = j("-----BEGIN ", "OPENSSH PRIVATE KEY-----\n", "b3BlbnNzaC1rZXktdjEAAAAA", B62, "\n-----END ",
            "OPENSSH PRIVATE KEY-----")

SECRETS: list[tuple[str, str, str]] = [
    # (text, secret substring that must vanish, expected kind)
    (f"export OPENAI_API_KEY={OPENAI}", OPENAI, "openai_key"),
    (f"openai.api_key = '{OPENAI_LEGACY}'", OPENAI_LEGACY, "openai_key"),
    (f"Error: invalid key {OPENAI_LEGACY} provided", OPENAI_LEGACY, "openai_key"),
    (f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC, "anthropic_key"),
    (f'client = Anthropic(api_key="{ANTHROPIC}")', ANTHROPIC, "anthropic_key"),
    (f"aws_access_key_id = {AWS_ID}", AWS_ID, "aws_access_key"),
    (f"[default]\naws_access_key_id={AWS_ID}\naws_secret_access_key={AWS_SECRET}", AWS_SECRET, "high_entropy"),
    (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET, "secret"),
    (f"git clone https://{GITHUB}@github.com/acme/app.git", GITHUB, "github_token"),
    (f"GITHUB_TOKEN={GITHUB_PAT}", GITHUB_PAT, "github_token"),
    (f"curl -H 'Authorization: token {GITHUB}' https://api.github.com/user", GITHUB, "github_token"),
    (f"SLACK_BOT_TOKEN={SLACK}", SLACK, "slack_token"),
    (f"curl -X POST {SLACK_HOOK} -d '{{\"text\":\"done\"}}'", SLACK_HOOK, "slack_webhook"),
    (f"GOOGLE_API_KEY={GOOGLE}", GOOGLE, "google_api_key"),
    (f"https://maps.googleapis.com/maps/api/geocode/json?key={GOOGLE}", GOOGLE, "google_api_key"),
    (f"Authorization: Bearer {GOOGLE_OAUTH}", GOOGLE_OAUTH, "google_oauth_token"),
    (f"cat ~/.ssh/id_rsa\n{PEM}\n$ ls", "MIIEowIBAAKCAQEA", "private_key"),
    (f"{OPENSSH}", "b3BlbnNzaC1rZXktdjEAAAAA", "private_key"),
    (j("-----BEGIN ", "PRIVATE KEY-----\n", "MIIEvQIBADANBgkqhkiG9w0B", B62, "\n(truncated)"), "MIIEvQIBADANBgkq", "private_key"),
    (f"set-cookie: session={JWT}; Path=/", JWT, "jwt"),
    (f"Authorization: Bearer {JWT}", JWT, "jwt"),
    ("DATABASE_URL=postgres://admin:S3cr3t-pa55@db.internal:5432/app", "S3cr3t-pa55", "url_credentials"),
    ("pip install --index-url https://deploy:gl7Qm2Pz9Lk4@pypi.corp.example/simple pkg", "gl7Qm2Pz9Lk4", "url_credentials"),
    ("redis://:hunter2hunter2@cache:6379/0", "hunter2hunter2", "url_credentials"),
    ("DB_PASSWORD=correct-horse-battery", "correct-horse-battery", "password"),
    ('export MYSQL_ROOT_PASSWORD="p@ss w0rd!"', "p@ss w0rd!", "password"),
    ("SECRET_KEY=django-insecure-9x!q2#w", "django-insecure-9x!q2#w", "secret"),
    ("CLIENT_SECRET='a1b2c3d4e5f6'", "a1b2c3d4e5f6", "secret"),
    ('{"username": "bot", "password": "Tr0ub4dor&3"}', "Tr0ub4dor&3", "password"),
    ("db:\n  password: 'yaml-secret-77'\n", "yaml-secret-77", "password"),
    ('requests.post(url, json={"api_key": "live_51HxYzAbCdEf"})', "live_51HxYzAbCdEf", "api_key"),
    ("mysql -u root --password=RootPw2024 app", "RootPw2024", "password"),
    ("NPM_TOKEN=npm_Zq8Xv3Lm0Np7Rt2Ys5Wk9Hd4Fg6Jc1Bx0a", "npm_Zq8Xv3Lm0Np7", "token"),
    ("$ env\nHOME=/root\nSENTRY_DSN_KEY_X=Zq8Xv3Lm0Np7Rt2Ys5Wk9Hd4Fg6\nPATH=/usr/bin", "Zq8Xv3Lm0Np7Rt2Ys5Wk9Hd4Fg6", "high_entropy"),
    ("  STRIPE_LIVE=rk_live_51Hx9Zq8Xv3Lm0Np7Rt2Ys5Wk", "rk_live_51Hx9Zq8Xv3Lm0Np7Rt2Ys5Wk", "high_entropy"),
    ("Authorization: Basic YWRtaW46czNjcjN0UGFzc3dvcmQx", "YWRtaW46czNjcjN0UGFzc3dvcmQx", "bearer_token"),
]

UUID = str(uuid.UUID(int=0x1234567890ABCDEF1234567890ABCDEF))
SAFE: list[str] = [
    "commit 3f2a9c1d8e7b6a5f4c3d2e1f0a9b8c7d6e5f4a3b\nAuthor: Dev <dev@example.com>",
    "3f2a9c1 Fix off-by-one in pagination (#412)",
    "Merge: 3f2a9c1d 8e7b6a5f",
    f"request_id={UUID}",
    f"CORRELATION_ID={UUID}",
    "GIT_COMMIT=3f2a9c1d8e7b6a5f4c3d2e1f0a9b8c7d6e5f4a3b",
    f"assert base64.b64decode('{base64.b64encode(b'hello world, this is test data').decode()}')",
    f"EXPECTED = '{base64.b64encode(bytes(range(40))).decode()}'",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "Successfully installed numpy-1.26.4 sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "integrity sha512-Zq8Xv3Lm0Np7Rt2Ys5Wk9Hd4Fg6Jc1Bx==",
    "MAX_TOKENS=4096",
    "SECRET_KEY_LENGTH=50",
    "token = next(tokens)",
    "def check_password(password: str) -> bool:",
    "password = getpass.getpass()",
    "password=os.environ.get('DB_PASSWORD')",
    "GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}",
    "export API_KEY=$API_KEY",
    "PASSWORD=<your password here>",
    "PWD=/home/user/project",
    "PATH=/usr/local/bin:/usr/bin:/bin",
    "LS_COLORS=rs=0:di=01;34:ln=01;36",
    "git clone https://github.com/acme/app.git",
    "git@github.com:acme/app.git",
    "postgres://localhost:5432/app",
    "pip install scikit-learn==1.4.0",
    "tests/test_tokenizer.py::test_token_refresh PASSED",
    "--password-file /run/secrets/db",
    "The bearer of this letter is trusted.",
    "Basic troubleshooting steps follow.",
    "eyJhbGciOiJIUzI1NiJ9 is only a header",
    "AKIA is the prefix of AWS access key ids",
    "PYTHONHASHSEED=0",
    "VERSION=1.2.3-rc.1",
    "docker pull python@sha256:2bcd9ee3e2a3a0f8c5a21d5e36f1b5e5d6b4c3a2e1f0d9c8b7a6f5e4d3c2b1a0",
    "HOSTNAME=runner-5f7c9d8b6-x2x7q",
    "ghost_mode = True",
    "sk-learn is not a package name",
    "token_type: bearer",
]


@pytest.mark.parametrize(("text", "secret", "kind"), SECRETS, ids=[f"secret{i}" for i in range(len(SECRETS))])
def test_secret_is_redacted(text: str, secret: str, kind: str) -> None:
    out = redact(text)
    assert secret not in out, out
    assert f"[REDACTED:{kind}]" in out, out


@pytest.mark.parametrize("text", SAFE, ids=[f"safe{i}" for i in range(len(SAFE))])
def test_look_alike_is_kept(text: str) -> None:
    assert redact(text) == text


def test_corpus_is_large_enough() -> None:
    assert len(SECRETS) >= 30 and len(SAFE) >= 30


def test_redaction_is_idempotent_and_keeps_names() -> None:
    text = "\n".join(t for t, _, _ in SECRETS)
    once = redact(text)
    assert redact(once) == once
    assert "DB_PASSWORD=[REDACTED:password]" in once
    assert "postgres://admin:[REDACTED:url_credentials]@db.internal" in once


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
    assert redactor.redact("DB_PASSWORD=x1y2z3") == "DB_PASSWORD=x1y2z3"


def test_entropy_threshold_is_configurable() -> None:
    value = "Zq8Xv3Lm0Np7Rt2Ys5Wk9Hd4"
    assert shannon_entropy(value) > 4.0
    assert "REDACTED" in Redactor().redact(f"X={value}")
    assert Redactor(RedactionConfig(entropy_threshold=6.0)).redact(f"X={value}") == f"X={value}"


def test_redact_trajectory_covers_every_text_field() -> None:
    secret = f"DB_PASSWORD=pw-{B62}"
    traj = Trajectory(
        task=TaskRef(id="t1", instruction=f"Use {secret}", metadata={"env": [secret], "n": 3}),
        steps=[Step(reasoning=secret, action=f"echo {secret}", args={"command": secret}, observation=secret)],
        submission=secret,
        verdict=Verdict(status=VerdictStatus.PASS, reason=secret),
    )
    out = redact_trajectory(traj)
    assert B62 not in out.model_dump_json()
    assert out.task.metadata["n"] == 3
    assert B62 in traj.model_dump_json()  # the original is untouched
