"""Look-alikes found in public agent runs, as generated classes, and the secrets in the same syntaxes that must go.

Each class is what a real SWE-bench run redacted wrongly (benchmarks/redaction_real_runs.py lists them), made from
a seed so that the rule is tested, not the example:

- a test's verdict line: `PASS: <what passed>`, the bare word `pass` before a colon (`PASS: Selection works`,
  `PASS: http://user:pass@example.com was accepted`), and prose (`Second pass: ...`);
- an argument of a call whose value is a variable (`auth=auth_info, **kwargs)`);
- a comparison with an upper-case word (`if token == 'COLLATE':`, a lexer);
- credentials in URLs of hosts reserved for documentation and tests (`user:pass@example.com`, `...@host:8080`);
- placeholder words joined by separators or a number (`'some:password'`, `SECRET_KEY='secret1'`, `auth: user:pass`,
  `Basic` + base64 of `user:pass`).

The secrets beside them use the same names and syntaxes with a value of their own: `pass: <random>` as a YAML key,
`"pass": "<random>"`, a URL to a real host, `Basic` + base64 of a real password, a comparison with a random token.
"""

from __future__ import annotations

import base64
import random

from helpers.secret_corpus import Gen, LookAlike, SecretCase
from helpers.secret_corpus_kube import PROGRAMMING_WORDS

PLACEHOLDER_PARTS = ("user", "pass", "password", "secret", "token", "key", "my", "some", "test", "admin", "word",
                     "name")
EXAMPLE_HOSTS = ("example.com", "example.org", "www.example.net", "api.example", "db.test", "svc.invalid", "host",
                 "hostname")
REAL_HOSTS = ("db.internal.acme.io", "10.0.3.7", "redis", "pg-prod-2.eu-west-1.rds.amazonaws.com", "gitlab.acme.dev")
SECRET_NAMES = ("token", "password", "secret", "auth", "api_key", "passwd")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _phrase(rng: random.Random, lo: int = 2, hi: int = 4) -> str:
    words = rng.sample(PROGRAMMING_WORDS, rng.randint(lo, hi))
    return " ".join([words[0].capitalize(), *words[1:]])


def _snake(rng: random.Random) -> str:
    return "_".join(rng.sample(PROGRAMMING_WORDS, rng.randint(1, 3)))


def _placeholder(rng: random.Random) -> str:
    parts = rng.sample(PLACEHOLDER_PARTS, rng.randint(2, 3))
    joined = rng.choice([":", "_", "-", ".", "@", "%40"]).join(parts)
    return joined + rng.choice(["", str(rng.randint(1, 9))])


def real_run_look_alikes(seed: int = 7, n: int = 12) -> list[LookAlike]:
    """n draws of every class; none holds a secret."""
    rng = random.Random(seed)
    g = Gen(seed)
    out: list[LookAlike] = []

    def add(id_: str, text: str) -> None:
        out.append(LookAlike(f"{id_}_{len(out)}", text))

    for _ in range(n):
        verdict = rng.choice(["PASS", "Pass"])
        add("verdict_phrase", f"{verdict}: {_phrase(rng)}\nFAIL: {_phrase(rng)}\n")
        add("verdict_url", f"{verdict}: http://{rng.choice(PLACEHOLDER_PARTS)}:{_placeholder(rng)}@"
                           f"{rng.choice(EXAMPLE_HOSTS)}/ was {rng.choice(['accepted', 'rejected'])}")
        add("verdict_assignment", f"{verdict}: {rng.choice(PROGRAMMING_WORDS)}={rng.randint(0, 99)} "
                                  f"{_phrase(rng, 1, 3).lower()}.")
        add("verdict_printed", f'    print("{verdict}: {rng.choice(PROGRAMMING_WORDS)}={rng.randint(0, 99)} '
                               f'{_phrase(rng, 1, 3).lower()}")')
        add("verdict_host", f"{verdict}: localhost:{rng.randint(1000, 9999)} -> 127.0.0.1:{rng.randint(1000, 9999)}")
        add("prose_pass", f"{rng.choice(['First', 'Second', 'Third', 'Final', 'Next'])} pass: "
                          f"`{_snake(rng)}='{rng.choice(PROGRAMMING_WORDS)}'`.")
        name = rng.choice(SECRET_NAMES)
        add("argument_variable", f"        response = session.get(url,\n            {name}={_snake(rng)}, "
                                 f"**kwargs)\n")
        add("argument_variable_close", f"    client = Client(base, {name}={_snake(rng)})\n")
        add("comparison_keyword", f"        if {rng.choice(['token', 'tok', 'secret'])} == "
                                  f"'{rng.choice(PROGRAMMING_WORDS).upper()}':\n            pos += 1\n")
        scheme = rng.choice(["http", "https", "postgres", "redis", "amqp"])
        add("example_host_url", f"    '{scheme}://{rng.choice(PLACEHOLDER_PARTS)}:{g.url_password(12)}@"
                                f"{rng.choice(EXAMPLE_HOSTS)}:{rng.randint(80, 9000)}/',\n")
        add("placeholder_value", f"                '{rng.choice(['password', 'PASSWORD', 'secret'])}': "
                                 f"'{_placeholder(rng)}',\n")
        add("placeholder_setting", f"settings.configure(SECRET_KEY='secret{rng.randint(1, 9)}', DEBUG=True)")
        add("placeholder_auth", f"urllib3.util.parse_url:\nauth: {_placeholder(rng)}\n")
        basic = _b64(f"{rng.choice(['user', 'admin', 'test'])}:{rng.choice(['pass', 'password', 'secret'])}")
        add("placeholder_basic", f"    expected = 'Basic {basic}'  # user:pass\n")
    return out


def real_run_secrets(seed: int = 7, n: int = 12) -> list[SecretCase]:
    """The same names and syntaxes with values of their own: each must go."""
    rng = random.Random(seed + 1)
    g = Gen(seed + 1)
    out: list[SecretCase] = []

    def add(id_: str, kind: str, text: str, secret: str) -> None:
        out.append(SecretCase(f"{id_}_{len(out)}", text, (secret,), kind))

    for _ in range(n):
        s = g.password(16)
        add("yaml_pass_key", "password", f"smtp:\n  user: mailer\n  pass: {s}\n", s)
        s = g.password(16)
        add("json_pass_key", "password", f'{{"user": "mailer", "pass": "{s}"}}', s)
        s = g.password(16)
        add("env_pass", "password", f"SMTP_PASS={s}\n", s)
        s = g.url_password(16)
        add("real_host_url", "url_credentials",
            f"DATABASE_URL=postgres://app:{s}@{rng.choice(REAL_HOSTS)}:5432/app", s)
        s = g.url_password(16)
        add("real_host_url_code", "url_credentials",
            f"    engine = create_engine('mysql://root:{s}@{rng.choice(REAL_HOSTS)}/shop')\n", s)
        s = _b64(f"deploy:{g.password(14)}")
        add("basic_real", "basic_auth", f"curl -H 'Authorization: Basic {s}' https://ci.acme.dev/api", s)
        s = g.b62(32)
        add("comparison_token", "token", f"    if token == '{s}':\n        return True\n", s)
        s = "secret" + g.b62(20)
        add("secret_prefix_value", "secret", f"SECRET_KEY='{s}'", s)
        s = g.password(16)
        add("argument_literal", "password", f"    conn = connect(host, password='{s}', timeout=3)\n", s)
    return out
