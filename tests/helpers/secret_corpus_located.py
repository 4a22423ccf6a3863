"""The secret corpus' newer classes, generated like the rest (tests/helpers/secret_corpus.py): values hidden by
base64 (a Kubernetes Secret's `data:`, a kubeconfig's `*-data`) and secrets known by where they sit (a token as a
URL's user, webhook token paths, query signatures, positional passwords in tracebacks, .pgpass lines)."""

from __future__ import annotations

import base64
import string
import uuid

from helpers.secret_corpus import URLSAFE, Gen, SecretCase


def add_encoded_and_located(g: Gen, add) -> None:
    """Add every case of this module through add(id, kind, text, *secrets)."""
    _encoded_cases(g, add)
    _located_cases(g, add)


def encoded_and_located_cases(seed: int = 7) -> list[SecretCase]:
    """Only the secrets hidden by base64 or known by where they sit (URL users, webhooks, queries, calls, .pgpass)."""
    cases: list[SecretCase] = []
    g = Gen(seed)
    for make in (_encoded_cases, _located_cases):
        make(g, lambda id_, kind, text, *secrets: cases.append(SecretCase(id_, text, secrets, kind)))
    return cases


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _encoded_cases(g: Gen, add) -> None:
    """Secrets hidden by base64: a Kubernetes Secret's `data:` values and a kubeconfig's `*-data` fields."""
    s = _b64(f"postgresql://app:{g.url_password()}@db.internal:5432/prod")
    add("k8s_secret_data_url", "url_credentials",
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-env\ntype: Opaque\ndata:\n  DATABASE_URL: {s}\n"
        f"  LOG_LEVEL: aW5mbw==\n", s)
    token = f"ghp_{g.b62(36)}"
    s = _b64(token)
    add("k8s_secret_data_vendor_token", "github_token", f"data:\n  GH: {s}\n  REGION: ZXUtd2VzdC0x\n", s)
    s = _b64(f"[client]\nuser = backup\npassword = {g.password()}\n")
    add("k8s_secret_data_file", "password", f"kind: Secret\ndata:\n  my.cnf: {s}\n", s)
    s = _b64(f"HMAC_SECRET={g.b62(40)}\nFEATURE_X=on\n")
    add("k8s_secret_json", "secret",
        f'{{"apiVersion": "v1", "kind": "Secret", "data": {{"app.env": "{s}"}}, "type": "Opaque"}}', s)
    block, _ = g.pem("RSA PRIVATE KEY", 600)
    key = _b64(block + "\n")
    cert = _b64("-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
                "-----END CERTIFICATE-----\n")
    add("kubeconfig_client_key_data", "private_key",
        f"users:\n- name: admin@prod\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n", key)
    s = g.password()
    add("k8s_secret_data_bare_password", "password", f"data:\n  DB_PASS: {_b64(s)}\n", _b64(s))
    s = _b64(f"amqp://worker:{g.url_password()}@mq.internal:5672/jobs")
    add("env_base64_value", "url_credentials", f"# .env\nBROKER_B64={s}\nWORKERS=4\n", s)


def _located_cases(g: Gen, add) -> None:
    """Secrets known by where they sit: URL users, webhook paths, query strings, call arguments, .pgpass lines."""
    s = g.b62(40)
    add("url_user_token_git", "url_credentials", f"$ git clone https://{s}@git.example.com/acme/infra.git", s)
    s = g.chars("abcdefghijklmnopqrstuvwxyz234567", 52)
    add("pip_extra_index_url_token", "url_credentials",
        f"pip install --extra-index-url https://{s}@pkgs.dev.azure.com/acme/_packaging/feed/pypi/simple/ acme-lib", s)
    s = g.hex(40)
    add("pip_conf_index_url_token", "url_credentials",
        f"[global]\nindex-url = https://{s}@pypi.internal.example.com/simple\ntimeout = 60\n", s)
    s = g.hex(128)
    add("secret_key_base_hex", "secret", f"RAILS_ENV=production\nSECRET_KEY_BASE={s}\n", s)
    s = g.hex(64)
    add("secret_key_base_yaml", "secret", f"production:\n  secret_key_base: {s}\n", s)
    s = g.hex(64)
    add("hmac_key_hex", "secret", f"export WEBHOOK_HMAC_KEY={s}", s)
    s = f"{g.digits(18)}/{g.chars(URLSAFE, 68)}"
    add("discord_webhook", "webhook", f"curl -X POST -d '{{\"content\": \"deployed\"}}' https://discord.com/api/webhooks/{s}", s)
    s = g.chars(string.ascii_lowercase + string.digits, 26)
    add("mattermost_webhook", "webhook", f"MATTERMOST_URL=https://chat.example.com/hooks/{s}", s)
    s = (f"{uuid.UUID(int=g.rng.getrandbits(128))}@{uuid.UUID(int=g.rng.getrandbits(128))}/IncomingWebhook/"
         f"{g.hex(32)}/{uuid.UUID(int=g.rng.getrandbits(128))}")
    add("teams_webhook", "webhook", f'requests.post("https://acme.webhook.office.com/webhookb2/{s}", json=card)', s)
    s = f"{g.b62(43)}%3D"
    add("azure_sas_sig", "signature",
        f"azcopy copy 'https://acme.blob.core.windows.net/backups/db.tar?sv=2022-11-02&ss=b&srt=o&sp=r"
        f"&se=2024-06-01T00:00:00Z&sig={s}' .", s)
    s = g.hex(64)
    add("s3_presigned_signature", "signature",
        f"GET https://acme.s3.amazonaws.com/report.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20240501T000000Z"
        f"&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={s} 200", s)
    s = g.b62(32)
    add("query_key", "api_key", f"INFO fetching https://api.weather.example.com/v1/forecast?city=Berlin&key={s}", s)
    s = g.chars(URLSAFE, 43)
    add("query_token", "token", f"wss://stream.example.com/v2/events?channel=builds&token={s}", s)
    s = pw = g.password()
    add("traceback_pymysql_connect", "password",
        f'Traceback (most recent call last):\n  File "/app/db.py", line 12, in <module>\n'
        f'    conn = pymysql.connect("db.internal", "app", "{pw}", "shop")\n'
        f'pymysql.err.OperationalError: (2003, "Can\'t connect to MySQL server on \'db.internal\'")', s)
    s = g.password()
    add("traceback_smtp_login", "password",
        f'  File "/app/mail.py", line 30, in send\n    server.login("alerts@example.com", \'{s}\')\n'
        f"smtplib.SMTPAuthenticationError: (535, b'5.7.8 Username and Password not accepted.')", s)
    s = g.password()
    add("oracle_connect_positional", "password", f'    con = oracledb.connect("scott", "{s}", "db.example.com/orclpdb")', s)
    s = g.password()
    add("paramiko_connect_positional", "password", f"    client.connect('10.0.0.7', 22, 'deploy', '{s}')", s)
    s = g.password()
    add("requests_auth_tuple", "password", f"r = requests.get(url, auth=('ci-bot', '{s}'), timeout=10)", s)
    s = g.password()
    add("ldap_bind_positional", "password", f'    conn.simple_bind_s("cn=admin,dc=example,dc=org", "{s}")', s)
    a, b = g.password(), g.password()
    add("pgpass_file", "password", f"$ cat ~/.pgpass\ndb.internal:5432:prod:app:{a}\n*:*:*:postgres:{b}\n", a, b)
