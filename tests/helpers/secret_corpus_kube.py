"""The secret corpus' third-round classes, generated like the rest (tests/helpers/secret_corpus.py):

- every secret of the corpus hidden in a Kubernetes Secret: the whole text base64-encoded under `data:` (YAML as
  kubectl prints it, JSON, a wrapped `base64` output, a YAML list, a bare jsonpath line), and the bare value alone
  under a name that says nothing (`data:` encoded, `stringData:` plain);
- kubeconfigs: a client key, a bearer token, a basic-auth password, an auth provider's id and refresh tokens, an
  exec plugin's env value (the certificates beside them stay);
- webhook URLs of the usual services, plain and base64-encoded;
and the look-alikes they must not touch: identifiers made of English words with a version digit, in the places
where the entropy rules look, and example values in exercise text.
"""

from __future__ import annotations

import base64
import json
import random
import string
import textwrap
import uuid

from helpers.secret_corpus import UPPER_ALNUM, URLSAFE, Gen, LookAlike, SecretCase, secret_cases

# Our own list of programming words, many of them missing from a general English vocabulary (the redactor must
# still read them as words: configurer, serializer, middleware, util).
PROGRAMMING_WORDS = (
    "abstract", "singleton", "proxy", "factory", "bean", "configurer", "definition", "registry", "post", "processor",
    "request", "response", "handler", "dispatcher", "serializer", "deserializer", "adapter", "builder", "provider",
    "listener", "resolver", "interceptor", "middleware", "router", "controller", "service", "repository", "manager",
    "session", "cache", "warmup", "scheduler", "executor", "thread", "pool", "connection", "database", "context",
    "application", "environment", "property", "source", "loader", "parser", "validator", "converter", "mapper",
    "template", "renderer", "widget", "panel", "settings", "default", "custom", "async", "batch", "queue", "event",
    "stream", "buffer", "reader", "writer", "client", "server", "gateway", "metrics", "health", "check", "timeout",
    "retry", "policy", "strategy", "delegate", "observer", "visitor", "wrapper", "helper", "util", "config",
)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def word_identifier(rng: random.Random) -> str:
    """An identifier of 3-7 programming words in one case style, with a version digit or two at the end or not."""
    parts = rng.sample(PROGRAMMING_WORDS, rng.randint(3, 7))
    style = rng.choice(["Camel", "camel", "snake", "kebab", "dotted"])
    if style == "Camel":
        name = "".join(p.capitalize() for p in parts)
    elif style == "camel":
        name = parts[0] + "".join(p.capitalize() for p in parts[1:])
    else:
        name = {"snake": "_", "kebab": "-", "dotted": "."}[style].join(parts)
    return name + rng.choice(["", str(rng.randint(1, 9)), str(rng.randint(10, 99)), f"V{rng.randint(1, 9)}"])


# --- secrets ---------------------------------------------------------------------------------------------------------

def _manifest_yaml(data: dict[str, str], block: str = "data") -> str:
    """A Secret as `kubectl get secret -o yaml` prints it (data before kind)."""
    rows = "".join(f"  {k}: {v}\n" for k, v in data.items())
    return (f"apiVersion: v1\n{block}:\n{rows}kind: Secret\nmetadata:\n  name: app-{len(data)}\n"
            f"  namespace: default\ntype: Opaque\n")


def _manifest_json(data: dict[str, str]) -> str:
    return json.dumps({"apiVersion": "v1", "data": data, "kind": "Secret",
                       "metadata": {"name": "app", "namespace": "default"}, "type": "Opaque"}, indent=4)


def kube_secret_cases(seed: int = 7) -> list[SecretCase]:
    """Every corpus secret inside a Kubernetes Secret, in the shapes kubectl, base64 and manifests give it."""
    rng = random.Random(seed)
    out: list[SecretCase] = []
    for case in secret_cases(seed):
        encoded = _b64(case.text)
        shape = rng.choice(["yaml", "json", "wrapped", "list", "jsonpath"])
        if shape == "yaml":
            text = _manifest_yaml({"LOG_LEVEL": _b64("info"), "item": encoded})
        elif shape == "json":
            text = _manifest_json({"LOG_LEVEL": _b64("info"), "item": encoded})
        elif shape == "wrapped":
            text = "$ base64 < settings.txt\n" + "\n".join(textwrap.wrap(encoded, 76)) + "\n$ "
        elif shape == "list":
            text = f"payloads:\n  - {_b64('hello')}\n  - {encoded}\n"
        else:
            text = f"$ kubectl get secret app -o jsonpath='{{.data.item}}'\n{encoded}\n"
        secret = encoded if shape != "wrapped" else "\n".join(textwrap.wrap(encoded, 76))
        # The kind inside is the most specific rule's (two may tie on a URL): not checked here.
        out.append(SecretCase(f"kube_{shape}_{case.id}", text, (secret,), ""))
        # The bare value alone, under a neutral name: the Secret is what says it is one.
        value = case.secrets[0]
        if "\n" not in value and len(value) >= 8:
            out.append(SecretCase(f"kube_data_value_{case.id}", _manifest_yaml({"region": _b64("eu-west-1"),
                                                                              "item": _b64(value)}),
                                  (_b64(value),), ""))
            if not value.startswith(("'", '"', "-", "#", "&", "*", "!", "%", "@", "`", "|", ">", "{", "[")):
                out.append(SecretCase(f"kube_string_data_{case.id}",
                                      _manifest_yaml({"region": "eu-west-1", "item": value}, "stringData"),
                                      (value,), ""))
    return out


def kubeconfig_cases(seed: int = 7) -> list[SecretCase]:
    """Kubeconfig users of every authentication kind; the certificates beside the keys stay."""
    g = Gen(seed)
    cert = _b64("-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
                "-----END CERTIFICATE-----\n")
    block, _ = g.pem("RSA PRIVATE KEY", 300)
    key = _b64(block + "\n")
    token = g.b62(40)
    password = g.password()
    id_token, refresh = g.jwt(), g.chars(URLSAFE, 43)
    env_token = f"hvs.{g.chars(URLSAFE, 92)}"
    head = (f"apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {cert}\n"
            f"    server: https://10.0.0.1:6443\n  name: prod\ncurrent-context: prod\nusers:\n")
    return [
        SecretCase("kubeconfig_client_key",
                   head + f"- name: admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n",
                   (key,), "private_key"),
        SecretCase("kubeconfig_token", head + f"- name: ci\n  user:\n    token: {token}\n", (token,), "token"),
        SecretCase("kubeconfig_basic_auth", head + f"- name: ops\n  user:\n    username: ops\n    password: {password}\n",
                   (password,), "password"),
        SecretCase("kubeconfig_auth_provider",
                   head + "- name: oidc\n  user:\n    auth-provider:\n      config:\n"
                          f"        client-id: kubernetes\n        id-token: {id_token}\n"
                          f"        idp-issuer-url: https://accounts.example.com\n        refresh-token: {refresh}\n"
                          "      name: oidc\n", (id_token, refresh), "jwt"),
        SecretCase("kubeconfig_exec_env",
                   head + "- name: vault\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                          "      command: vault-k8s-auth\n      env:\n      - name: VAULT_ADDR\n"
                          "        value: https://vault.internal:8200\n      - name: VAULT_TOKEN\n"
                          f"        value: {env_token}\n", (env_token,), "vault_token"),
    ]


def webhook_urls(g: Gen) -> list[tuple[str, str, str]]:
    """(id, url, the part that must vanish) of the usual webhook services."""
    slack_path = f"services/T{g.chars(UPPER_ALNUM, 10)}/B{g.chars(UPPER_ALNUM, 10)}/{g.b62(24)}"
    discord_path = f"{g.digits(18)}/{g.chars(URLSAFE, 68)}"
    teams_path = (f"{uuid.UUID(int=g.rng.getrandbits(128))}@{uuid.UUID(int=g.rng.getrandbits(128))}/IncomingWebhook/"
                  f"{g.hex(32)}/{uuid.UUID(int=g.rng.getrandbits(128))}")
    zapier_path = f"hooks/catch/{g.digits(7)}/{g.chars(string.ascii_lowercase + string.digits, 5)}{g.digits(1)}"
    mattermost = g.chars(string.ascii_lowercase + string.digits, 26)
    generic = g.b62(32)
    return [
        ("slack", f"https://hooks.slack.com/{slack_path}", f"https://hooks.slack.com/{slack_path}"),
        ("discord", f"https://discord.com/api/webhooks/{discord_path}", discord_path),
        ("teams", f"https://acme.webhook.office.com/webhookb2/{teams_path}", teams_path),
        ("zapier", f"https://hooks.zapier.com/{zapier_path}/", zapier_path),
        ("mattermost", f"https://chat.example.com/hooks/{mattermost}", mattermost),
        ("generic", f"https://ci.example.com/api/v1/webhooks/{generic}", generic),
    ]


def webhook_cases(seed: int = 7) -> list[SecretCase]:
    """Webhook URLs in a notifier's config, in a curl command, and base64-encoded in a Secret's data."""
    g = Gen(seed)
    out = []
    for name, url, secret in webhook_urls(g):
        out.append(SecretCase(f"webhook_{name}_config", f"notify:\n  on_failure: {url}\n  channel: builds\n",
                              (secret,), "slack_token" if name == "slack" else "webhook"))
        out.append(SecretCase(f"webhook_{name}_curl", f"curl -s -X POST -d '{{\"text\": \"done\"}}' {url}",
                              (secret,), "slack_token" if name == "slack" else "webhook"))
        encoded = _b64(url)
        out.append(SecretCase(f"webhook_{name}_kube_data", _manifest_yaml({"NOTIFY_URL": encoded, "mode": _b64("on")}),
                              (encoded,), "slack_token" if name == "slack" else "webhook"))
    return out


def round_three_cases(seed: int = 7) -> list[SecretCase]:
    return kube_secret_cases(seed) + kubeconfig_cases(seed) + webhook_cases(seed)


# --- look-alikes -----------------------------------------------------------------------------------------------------

def word_identifier_look_alikes(seed: int = 7, n: int = 40) -> list[LookAlike]:
    """Identifiers of English words where the entropy rules look: env lines, quoted strings on lines that talk
    about tokens, headers of names that say nothing, YAML values."""
    rng = random.Random(seed)
    out = [LookAlike("spring_bean_issue_31", "SPRING_MAIN_BEAN=AbstractSingletonProxyFactoryBeanConfigurer2")]
    shapes = [
        lambda i: f"SPRING_{i.upper().replace('.', '_').replace('-', '_')[:20]}={i}",
        lambda i: f'handler = registry.get("{i}")  # the token refresh handler',
        lambda i: f"export APP_MAIN_CLASS={i}",
        lambda i: f"  main_class: {i}\n  replicas: 3",
        lambda i: f"[INFO] Bean '{i}' of type [{i}] is not eligible for auto-proxying (auth)",
        lambda i: f"X-Request-Handler: {i}",
    ]
    for k in range(n):
        ident = word_identifier(rng)
        if len(ident) < 20:
            ident += "Service" + str(rng.randint(1, 9))
        out.append(LookAlike(f"word_identifier_{k}", rng.choice(shapes)(ident)))
    return out


def exercise_example_look_alikes(seed: int = 7) -> list[LookAlike]:
    """Example values of exercises and documents, as task text holds them: none is a leaked credential."""
    rng = random.Random(seed)
    word = rng.choice(["PASSWORD", "password", "Password", "SECRET", "Token", "passwd"])
    n = rng.randint(1, 999)
    return [
        LookAlike("word_count_issue_31", "Count the words in a phrase.\n\nFor example, the input 'PASSWORD 123' "
                                         "has two words:\n\n    password: 'PASSWORD 123'\n    count: 2\n"),
        LookAlike("example_assignment", f"Example:\n    password = '{word} {n}'\n    assert count_words(password) == 2"),
        LookAlike("example_json", f'Input: {{"password": "{word} {n}", "user": "bob"}}\nOutput: 2 words'),
        LookAlike("example_kwarg", f"validate(password='my password {n}')  # returns False: too weak"),
        LookAlike("example_yaml", f"```yaml\nauth:\n  token: your token here\n  secret: my secret {n}\n```"),
        LookAlike("example_flag", f'mtl login --password "example password {n}"  (an example: use your own)'),
    ]


def given_text_examples(seed: int = 7) -> list[tuple[str, str]]:
    """(task text, the readable example password in it): kept in task text the agent was given, redacted in logs."""
    rng = random.Random(seed)
    phrases = ["open sesame", "correct horse battery staple", "hello world 42", "Summer Breeze 2024", "blue river"]
    out = []
    for i, phrase in enumerate(rng.sample(phrases, len(phrases))):
        out.append((f"Write check(password) for the rules below.\nInput: password = \"{phrase}\"\nOutput: False",
                    phrase))
        out.append((f'Example request body: {{"user": "ada", "password": "{phrase}"}} (case {i})', phrase))
    return out


def round_three_look_alikes(seed: int = 7) -> list[LookAlike]:
    return word_identifier_look_alikes(seed) + exercise_example_look_alikes(seed)
