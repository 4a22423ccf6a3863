"""Our own secret rules: the syntaxes and vendor formats detect-secrets does not cover, and the look-alike guards.

Every rule yields `Finding`s: the exact span of the secret value in the text (never the name, the quotes or the
separator), so redaction changes nothing but the secret. A value only counts when it is not a reference or a
placeholder (`$VAR`, `${VAR}`, `getenv(...)`, `'changeme'`, a path, a type hint): redacting those would turn valid
code into invalid code and erase what a memory is about.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Iterator, Sequence

from mtl_graph.redaction.prescan import CONTEXT, ENTROPY, KEYWORD, PREFIX, VENDOR, Finding, Span, finditer
from mtl_graph.redaction.words import is_word_identifier

__all__ = ["CONTEXT", "ENTROPY", "KEYWORD", "PREFIX", "VENDOR", "Finding"]

# --- names --------------------------------------------------------------------------------------------------------

_SECRET_WORDS = {"password", "passwd", "passphrase", "pwd", "pass", "secret", "token", "credential", "credentials",
                 "apikey", "requirepass", "dockerconfigjson", "masterauth", "storepass", "keypass"}
_SECRET_KEY_OWNERS = {"api", "access", "secret", "private", "auth", "account", "master", "signing", "encryption",
                      "session", "client", "app", "shared", "license", "subscription", "storage", "consumer",
                      "hmac", "jwt", "aes", "cipher", "crypt", "otp", "totp", "webhook", "cookie", "csrf"}
# A last word that only says how the secret is stored: SECRET_KEY_BASE, TOKEN_HEX, API_KEY_B64.
VALUE_SUFFIXES = {"base", "value", "b64", "base64", "hex", "raw"}
_SECRET_EXACT = {"auth", "_auth"}
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "credentials", "privatekey",
                   "accesskey", "secretkey", "accountkey")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")


def name_segments(name: str) -> list[str]:
    """Lower-case words of an identifier in any case style: `_authToken` -> [auth, token]."""
    return [w.lower() for part in re.split(r"[^A-Za-z0-9]+", name) for w in _CAMEL.findall(part)]


def is_secret_name(name: str) -> bool:
    """Does this key, variable, header or flag name hold a secret? (DB_PASSWORD yes, MAX_TOKENS / token_type no)."""
    if name.strip("\"'").lower() in _SECRET_EXACT:
        return True
    words = name_segments(name)
    if len(words) >= 2 and words[-1] in VALUE_SUFFIXES:
        words = words[:-1]
    if not words:
        return False
    if words[-1] in _SECRET_WORDS or words[-1].endswith(_SECRET_ENDINGS):  # PGPASSWORD, APIKEY, authtoken
        return True
    return len(words) >= 2 and words[-1] == "key" and words[-2] in _SECRET_KEY_OWNERS


def kind_of(name: str) -> str:
    """The marker kind for a secret stored under this name."""
    words = name_segments(name)
    joined = "".join(words)
    if "passw" in joined or "passphrase" in joined or any(w == "pwd" or w.endswith("pass") for w in words):
        return "password"
    if "token" in joined:
        return "token"
    if "apikey" in joined or "api" in words:
        return "api_key"
    return "credential" if "credential" in joined else "secret"


# --- values that are not secrets ------------------------------------------------------------------------------------

_PLACEHOLDERS = {
    "hashed", "secret", "password", "passwd", "changeme", "change_me", "change-me", "changeit", "dummy", "example",
    "placeholder", "test", "testing", "fake", "foo", "bar", "baz", "none", "null", "nil", "true", "false",
    "undefined", "redacted", "hidden", "masked", "empty", "required", "optional", "str", "string", "bytes", "int",
    "bool", "any", "token", "your_password", "your-password", "yourpassword", "mypassword", "your_token",
    "your-token", "your_api_key", "your-api-key", "api_key", "apikey", "secret_key", "pass", "stdin", "prompt",
}
# With the placeholders, the words an example value is made of (`'PASSWORD 123'`, `"my secret token"`).
_EXAMPLE_WORDS = {"my", "your", "our", "the", "a", "an", "some", "new", "old", "here", "sample", "demo", "value",
                  "word", "words", "key", "user", "admin", "login", "api", "access", "db", "name", "username"}
_EXAMPLE_NUMBER = re.compile(r"\d{1,6}")
_WORD_EDGES = ".,;:!?()[]{}<>\"'`"
_REFERENCE_START = tuple("$<{[*")
_PRINTF_OR_BATCH = re.compile(r"%\(\w+\)[sd]|%\w+%")
_ANNOTATION = re.compile(r"[A-Za-z_][\w.]*\[[^\]]*\](?:\s*=.*)?|[A-Za-z_][\w.]*\s+=\s.*")
_CALL_OR_INDEX = re.compile(r"[A-Za-z_][\w.]*\s*(?:\(.*\)|\[.*\])")
_NAME_SEGMENT = r"(?:[a-z_][a-z0-9_]*|[A-Z_][A-Z0-9_]*|[a-z]+(?:[A-Z][a-z0-9]*)+|(?:[A-Z][a-z0-9]+)+)"
_LOWER_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_HAS_DIGIT = re.compile(r"\d")
_DOTTED_NAME = re.compile(rf"{_NAME_SEGMENT}(?:\.{_NAME_SEGMENT})+")
# Lower-case words, snake_case and kebab-case names (a variable or an option in code and config; as a password,
# too weak to be worth a marker that would break the code around it).
_SNAKE_NAME = re.compile(r"[a-z_]+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]+(?:-[a-z]+)+")
# Names without digits: CamelCase types (`SecretStr`), camelCase variables, ENV_VAR names used as values, and
# upper-case words (a lexer's `token == 'COLLATE'`, a constant): as a password, as weak as a lower-case word.
_IDENTIFIER = re.compile(r"(?:[A-Z][a-z]+){2,}|[a-z]+(?:[A-Z][a-z]+)+|[A-Z]+(?:_[A-Z]+)*")
# Code and prose after `name:`: type unions, trailing commas of parameter lists, docstring sentences.
# The last alternative: an argument that ends where its name does (`auth=auth_info, **kwargs)` in a call).
_CODE_OR_PROSE = re.compile(r".*(?:\s\|\s|,|[([{])|\S+(?:\s+\S+){2,}|[a-z]+(?:\s+[a-z]+)+"
                            r"|(?:await|yield|new|not|lambda|typeof)\s.*|[a-z_]+(?:[A-Z][a-z]*)*\s*[,)\]}].*")
_PATH = re.compile(r"(?:~|\.{1,2})?(?:/[\w.@+-]{1,40})+/?|[A-Za-z]:\\[\w\\. -]*")
_RANDOM_SEGMENT = re.compile(r"(?=[^/]*[a-z])(?=[^/]*[A-Z])(?=[^/]*\d)[A-Za-z0-9+]{10,}")
_REPEATED = re.compile(r"(.)\1*|[xX]{3,}(?:[-_.][xX]+)*|\d+(?:\.\d+)+")  # ... and decimals / versions


def is_reference_or_placeholder(value: str, quoted: bool = False) -> bool:
    """A variable reference, a call, a path, a type or a placeholder word: text that names a secret without being one.
    Unquoted values that read as code or prose (`str | None`, `await token`, `The new token, or ...`) are not
    secrets either; inside quotes they are (a passphrase)."""
    v = value.strip()
    if v != value or v[:1] in (",", ";", ")", "(", "'", '"') or len(v) < 3 or v.startswith(_REFERENCE_START):
        return True
    if v.lower() in _PLACEHOLDERS or (not quoted and _CODE_OR_PROSE.fullmatch(v)) or is_example_phrase(v):
        return True
    if v.startswith(("process.env", "os.environ", "ENV[", "env(", "secrets.", "-----BEGIN")):  # PEM: own rule
        return True
    if v.endswith("...") or "(" in v:
        return True
    if _REPEATED.fullmatch(v) or _PRINTF_OR_BATCH.fullmatch(v) or is_path(v):
        return True
    if _DOTTED_NAME.fullmatch(v) and all(_LOWER_NAME.fullmatch(p) for p in v.split(".") if _HAS_DIGIT.search(p)):
        return True  # `self.token`, `httpx2.Auth`; random text can look like `Ab1Cd.X7` too: digits only in lower case
    return any(p.fullmatch(v) for p in (_CALL_OR_INDEX, _SNAKE_NAME, _IDENTIFIER, _ANNOTATION))


# What joins the words of an example value: spaces, `:` `@` `/` `_` `.` `-`, a backslash, their percent-encodings,
# and the boundary between letters and a number (`secret1`, `pass%40word`, `some:password`, `user:pass`).
_EXAMPLE_JOINS = re.compile(r"(?:\s|[:@/\\_.-]|%(?:40|3[aA]|2[fF]))+|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")


def is_example_phrase(value: str) -> bool:
    """Placeholder words and small numbers (`PASSWORD 123`, `my secret 2`, `some:password`, `user:pass`, `secret1`):
    the example input of an exercise, a document or a test, never a chosen secret (a passphrase has words of its
    own: `correct horse staple`)."""
    phrase = [w for w in _EXAMPLE_JOINS.split(value) if w]
    if len(phrase) < 2:
        return False
    words = [w.strip(_WORD_EDGES).lower() for w in phrase]
    return (all(w in _PLACEHOLDERS or w in _EXAMPLE_WORDS or _EXAMPLE_NUMBER.fullmatch(w) for w in words)
            and not all(_EXAMPLE_NUMBER.fullmatch(w) for w in words))


def is_alias(name: str, value: str) -> bool:
    """`token=token`, `_Key = mod.Key`: a name bound to a variable of the same name."""
    return value.rsplit(".", 1)[-1].lstrip("_") == name.strip("\"'").lstrip("_")


def is_path(value: str) -> bool:
    """A filesystem path (base64 keys contain slashes too, but their segments are random mixed-case runs)."""
    return bool(_PATH.fullmatch(value)) and not any(_RANDOM_SEGMENT.fullmatch(s) for s in value.split("/"))


def looks_random(value: str) -> bool:
    """Letters and digits mixed: tokens and keys, not English words or identifiers made of them (a CamelCase
    class name with a version digit, `AbstractSingletonProxyFactoryBeanConfigurer2`)."""
    return (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            and not is_word_identifier(value))


_HEX = re.compile(r"[0-9a-fA-F]+")
_HASH_LENGTHS = {32, 40, 56, 64, 96, 128} | set(range(7, 13))
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def is_checksum_or_id(value: str) -> bool:
    """Git SHAs (short or full), md5/sha digests, UUIDs, and base64 that decodes to readable text."""
    if _UUID.fullmatch(value) or (_HEX.fullmatch(value) and len(value) in _HASH_LENGTHS):
        return True
    return _decodes_to_text(value)


def _decodes_to_text(value: str) -> bool:
    """Base64 test constants in code usually encode readable text; random keys never do."""
    if len(value) < 16:
        return False
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return sum(c.isprintable() or c.isspace() for c in text) == len(text) and ":" not in text


# --- vendor formats detect-secrets lacks ----------------------------------------------------------------------------

# No leading \b: a pattern that starts with a literal lets `re` skip ahead fast; the token start is checked after.
VENDOR_PATTERNS: list[tuple[str, re.Pattern[str]]] = [(kind, re.compile(p)) for kind, p in [
    ("anthropic_key", r"sk-ant-(?:api|admin|oat|ort)\d{2}-[A-Za-z0-9_-]{20,}"),
    ("openai_key", r"sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{32,}\b)"),
    ("github_token", r"gh[pousr]_[A-Za-z0-9]{36,255}\b|github_pat_[A-Za-z0-9_]{22,255}"),
    ("huggingface_token", r"(?:hf|api_org)_[A-Za-z0-9]{30,}\b"),
    ("google_api_key", r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    ("google_oauth", r"ya29\.[0-9A-Za-z_-]{20,}|GOCSPX-[0-9A-Za-z_-]{20,}"),
    ("npm_token", r"npm_[A-Za-z0-9]{36}\b"),
    ("pypi_token", r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    ("stripe", r"[sr]k_(?:live|test)_[0-9a-zA-Z]{20,}\b|whsec_[0-9a-zA-Z]{24,}\b"),
    ("slack_token", r"xox[abposre]-(?:[A-Za-z0-9]+-){1,4}[A-Za-z0-9]+\b|xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+\b"),
    ("gitlab_token", r"gl(?:pat|dt|rt|ptt|cbt|imt|soat|ft|agent|oas)-[A-Za-z0-9_-]{20,}"),
    ("digitalocean_token", r"do[por]_v1_[a-f0-9]{64}\b"),
    ("shopify_token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    ("databricks_token", r"dapi[a-f0-9]{32}(?:-\d)?\b"),
    ("mailgun_key", r"key-[0-9a-f]{32}\b"),
    ("linear_key", r"lin_api_[A-Za-z0-9]{40}\b"),
    ("sentry_dsn", r"://(?P<secret>[0-9a-f]{32})@[\w.-]*sentry"),
    ("openrouter_key", r"sk-or-v1-[a-f0-9]{64}\b"),
    ("groq_key", r"gsk_[A-Za-z0-9]{48,}\b"),
    ("replicate_token", r"r8_[A-Za-z0-9]{37}\b"),
    ("xai_key", r"xai-[A-Za-z0-9]{70,}\b"),
    ("perplexity_key", r"pplx-[A-Za-z0-9]{40,}\b"),
    ("vault_token", r"hv[sb]\.[A-Za-z0-9_-]{90,}"),
    ("atlassian_token", r"ATATT3[A-Za-z0-9_=-]{50,}"),
    ("postman_key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"),
    ("grafana_token", r"glsa_[A-Za-z0-9]{32}_[a-f0-9]{8}\b"),
    ("newrelic_key", r"NRAK-[A-Z0-9]{27}\b"),
    ("doppler_token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}\b"),
    ("supabase_token", r"sbp_[a-f0-9]{40}\b"),
    ("age_secret_key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}\b"),
    ("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("aws_access_key", r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA|IPA)[0-9A-Z]{16}\b"),
]]


# --- context rules: assignment syntaxes, URLs, headers, command lines -----------------------------------------------

_NAME = r"[A-Za-z_][\w.\-]*"
CONTEXT_PATTERNS = [re.compile(p, re.MULTILINE) for p in [
    # .env, shell, INI / TOML / properties, YAML block values: the rest of the line is the value.
    rf"^[ \t]*(?:export[ \t]+|set[ \t]+|-[ \t]+)?[\"']?\.?(?P<name>{_NAME})[\"']?[ \t]*(?:=|:(?![:=]))[ \t]*"
    rf"(?P<value>[^\s\"'`#;][^\n\"'`]*?)[ \t]*(?:[ \t][#;].*)?\r?$",
    # Quoted values anywhere: JSON, code, YAML flow, kwargs, comparisons.
    rf"[\"']?(?<![\w.\-])(?P<name>{_NAME})[\"'\]]?[ \t]*(?:=|:=|:|=>|==|!=|\?\?=)[ \t]*@?"
    rf"(?P<q>[\"'`])(?P<value>(?:(?!(?P=q))(?:[^\n\\]|\\.))+)(?P=q)",
    # A JSON document inside a JSON string (tool arguments, API bodies in logs): `{\"password\": \"...\"}`.
    rf"(?<![\w.\-])(?P<name>{_NAME})(?:\\[\"'])?[ \t]*(?:=|:|==|=>)[ \t]*(?P<q>\\[\"'])(?P<value>(?:(?!(?P=q))[^\n\\])+)(?P=q)",
    # name=value inside a line: env prefixes of a command, libpq / JDBC / ODBC DSNs, query strings, .npmrc.
    rf"(?<![\w.\-])(?:-D)?(?P<name>{_NAME})=(?P<value>(?:[^\s\"'`;&,)\\]|\\(?![nrt\"]))+)",
    # Space-separated: ~/.netrc (`machine h login u password p`), redis.conf (`requirepass p`).
    r"(?:\bmachine[ \t][^\n]*?[ \t]|^[ \t]*)(?P<name>password|passwd|requirepass|masterauth)[ \t]+(?P<value>\S+)",
    # Kubernetes / CI env lists: the name and the value are on consecutive lines.
    r"name:[ \t]*[\"']?(?P<name>[\w.-]+)[\"']?[ \t]*\r?\n[ \t]*value:[ \t]*(?P<q>\\?[\"']?)(?P<value>[^\s\"'\\]+)(?P=q)",
    # --password VALUE, --token=VALUE, -password VALUE (the flag's own name says what it holds).
    r"(?<!\S)--?(?P<name>[A-Za-z][\w-]*)(?:=|[ \t]+)(?P<q>[\"']?)(?P<value>(?!-)[^\s\"'\\]+)(?P=q)",
    r"(?<!\S)--?(?P<name>[A-Za-z][\w-]*)(?:=|[ \t]+)(?P<q>\\?[\"'])(?P<value>[^\"'\n\\]+)(?P=q)",  # a quoted phrase
]]
# A command's password argument: a bare word, or a quoted string that may hold spaces.
_ARGUMENTS = (r"(?P<q>[\"']?)(?P<value>[^\s\"']+)(?P=q)", r"(?P<q>\\?[\"'])(?P<value>[^\"'\n\\]+)(?P=q)")
COMMAND_PASSWORDS = [re.compile(command + argument) for argument in _ARGUMENTS for command in (
    r"\b(?:mysql|mariadb|mysqldump|mysqladmin|mysqlimport|mysqlsh|mysqlcheck)\b[^\n|;&]{0,300}?(?<=\s)-p",
    r"\b(?:(?:docker|podman|buildah|nerdctl|skopeo)[ \t]+login|sshpass|mysql\w*)\b[^\n|;&]{0,300}?(?<=\s)-p[ \t]+",
    r"\bredis-cli\b[^\n|;&]{0,300}?(?<=\s)-a[ \t]+",
)]
URL_CREDENTIALS = re.compile(r"(?<![\w+.-])[a-zA-Z][\w+.-]*://[^\s:/@?#\[\]\"']*:(?P<value>[^\s/@?#\"']+)@"
                             r"(?P<host>[\w\[][^\s/:?#\"'\]]*)")
# Hosts reserved for documentation and tests (RFC 2606, RFC 6761) and the placeholder word `host`: the credentials
# of `http://user:pass@example.com` or `user@name:p@ss@host` illustrate a URL, they open nothing.
_EXAMPLE_HOST = re.compile(r"(?i)(?:[\w-]+\.)*(?:example(?:\.(?:com|net|org))?|[\w-]+\.(?:example|test|invalid))"
                           r"|host(?:name)?")
CURL_USER = re.compile(r"(?<!\S)(?:-u|--user|--proxy-user)[ \t]+[\"']?[^\s:\"']+:(?P<value>[^\s\"']+)")
AUTH_HEADER = re.compile(r"(?i)\b(?:proxy-)?authori[sz]ation[\"']?[ \t]*[:=][ \t]*[\"']?"
                          r"(?:(?:bearer|token|digest|apikey|api-key|key|sso-key|ssws|otp)[ \t]+)?"
                          r"(?P<value>[\w.~+/=:-]{8,})")
_HEADER = re.compile(r"(?:^|(?<=[\s\"'{,]))(?P<name>[A-Za-z][A-Za-z0-9-]*)[\"']?:[ \t]*(?P<value>[^\s\"',;]{8,})")
_BEARER = re.compile(r"(?i)(?<![\w-])(?:bearer|token)[ \t]+(?P<value>[\w.~+/-]{16,}=*)")
_BASIC = re.compile(r"(?i)\bbasic[ \t]+(?P<value>[A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])")
_COOKIE = re.compile(r"(?i)\b(?P<set>set-)?cookie[\"']?[ \t]*:[ \t]*(?P<pairs>[^\n\"']+)")
_COOKIE_PAIR = re.compile(r"(?:^|;)[ \t]*(?P<name>[^=;\s]+)=(?P<value>[^;\s]+)")
_COOKIE_ATTRIBUTES = {"path", "domain", "expires", "max-age", "samesite", "secure", "httponly", "priority"}
# A key block up to its END line (base64, JSON-escaped newlines, `Proc-Type:` headers), or, cut off, the run of
# base64 lines after BEGIN. Anything else between BEGIN and END (code that names the markers) is not a key.
PEM = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----(?:"
                  r"(?P<body>(?:(?!-----)[A-Za-z0-9+/=\s:,-]|\\[nr])*?)-----END (?P=label)-----"
                  r"|(?P<cut>(?:(?:\\[nr]|\s)*[A-Za-z0-9+/=]{4,})+))")
_PEM_BODY = re.compile(r"(?:\\n|\\r|\s)*(?P<secret>[\s\S]*?)(?:\\n|\\r|\s)*\Z")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{16}")
PUTTY = re.compile(r"Private-Lines: \d+\r?\n(?P<value>(?:[A-Za-z0-9+/=]+(?:\r?\n|\Z))+)")


def value_findings(pattern: re.Pattern[str], text: str, spans: Sequence[Span], kind: str | None = None,
                   need_name: bool = True) -> Iterator[Finding]:
    """Findings of a pattern with a `value` group (and a `name` group that must be a secret name, if need_name)."""
    for m in finditer(pattern, text, spans):
        value = m["value"]
        name = m.groupdict().get("name") or ""
        if need_name and (not is_secret_name(name) or is_label(text, m)):
            continue
        if is_reference_or_placeholder(value, quoted=bool(m.groupdict().get("q"))) or is_alias(name, value):
            continue
        yield Finding(m.start("value"), m.end("value"), kind or kind_of(name), CONTEXT)


def is_label(text: str, m: re.Match[str]) -> bool:
    """The bare word `pass` before a colon as a label, not a password's name: a test's verdict (`PASS: Selection
    works`, `PASS: localhost:8000 -> ...`) or prose (`Second pass: ...`). It names a password only as a key: quoted
    (`"pass": ...`), or first on its line (`pass: s3cr3t`, YAML) with a value of one word."""
    if m["name"].lower() != "pass" or ":" not in text[m.end("name"):m.start("value")].replace("://", ""):
        return False
    quote = text[m.start("name") - 1:m.start("name")]
    if quote in ("'", '"') and text[m.end("name"):m.end("name") + 1] == quote:
        return False
    line_start = text.rfind("\n", 0, m.start("name")) + 1
    line_end = text.find("\n", m.end("value"))
    rest = text[m.start("value"):line_end if line_end >= 0 else len(text)].strip()
    return text[line_start:m.start("name")].strip(" \t-") != "" or len(rest.split()) > 1


def url_credential_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """The password of `scheme://user:password@host`, unless the host is an example's (`_EXAMPLE_HOST`)."""
    for m in finditer(URL_CREDENTIALS, text, spans):
        if not _EXAMPLE_HOST.fullmatch(m["host"]) and not is_reference_or_placeholder(m["value"]):
            yield Finding(m.start("value"), m.end("value"), "url_credentials", CONTEXT)


def header_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """`X-Api-Key: value` headers: a secret name and a random-looking value."""
    for m in finditer(_HEADER, text, spans):
        if is_label(text, m):
            continue
        if is_secret_name(m["name"]) and looks_random(m["value"]) and not is_reference_or_placeholder(m["value"]):
            yield Finding(m.start("value"), m.end("value"), kind_of(m["name"]), CONTEXT)


def bearer_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """`Bearer <token>` / `token <token>` outside an Authorization header."""
    for m in finditer(_BEARER, text, spans):
        if looks_random(m["value"]) and not is_reference_or_placeholder(m["value"]):
            yield Finding(m.start("value"), m.end("value"), "bearer_token", CONTEXT)


def basic_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """`Basic <base64 of user:password>`."""
    for m in finditer(_BASIC, text, spans):
        if _is_basic_credential(m["value"]):
            yield Finding(m.start("value"), m.end("value"), "basic_auth", CONTEXT)


def _is_basic_credential(value: str) -> bool:
    """base64 of `user:password`, unless both are placeholder words (`user:pass`, a test's expected header)."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded and not is_example_phrase(decoded.decode("utf-8", "replace"))


def cookie_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """Random-looking cookie values of `Cookie:` / `Set-Cookie:` headers (attributes like Path= are not values)."""
    for m in finditer(_COOKIE, text, spans):
        for i, pair in enumerate(_COOKIE_PAIR.finditer(m["pairs"])):
            if (m["set"] and i > 0) or pair["name"].lower() in _COOKIE_ATTRIBUTES:
                continue
            value = pair["value"]
            if len(value) >= 8 and looks_random(value) and not is_reference_or_placeholder(value):
                offset = m.start("pairs")
                yield Finding(offset + pair.start("value"), offset + pair.end("value"), "cookie", CONTEXT)


def vendor_findings(pattern: re.Pattern[str], kind: str, text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """A vendor key format detect-secrets does not know (or knows too narrowly), at the start of a token."""
    group = "secret" if pattern.groupindex else 0
    for m in finditer(pattern, text, spans):
        start = m.start(group)
        if group or start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
            yield Finding(start, m.end(group), kind, PREFIX)


def private_key_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """The body of every PEM private key block (also JSON-escaped, also cut off)."""
    for m in finditer(PEM, text, spans):
        group = "body" if m["body"] is not None else "cut"
        body = _PEM_BODY.match(m[group])
        if body and _BASE64_RUN.search(body["secret"]):
            start = m.start(group) + body.start("secret")
            yield Finding(start, start + len(body["secret"]), "private_key", VENDOR)


def putty_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """The private lines of PuTTY key files."""
    for m in finditer(PUTTY, text, spans):
        value = m["value"].rstrip()
        yield Finding(m.start("value"), m.start("value") + len(value), "private_key", VENDOR)
