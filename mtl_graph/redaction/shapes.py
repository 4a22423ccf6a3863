"""Credentials recognised by where they sit rather than by a vendor format or a secret name.

- a token as the user part of a URL (`https://<token>@git.example.com/...`, pip's `--extra-index-url`);
- the token path of a webhook URL (`/api/webhooks/<id>/<token>`, `/hooks/<token>`, `hooks.<host>/...`, where the
  ids of the path together are the capability);
- signatures and keys in a query string (`?key=`, `&sig=`, `X-Amz-Signature=`; `token=` is a secret name already);
- a password passed by position to a connect / login call (the source lines a traceback quotes);
- `.pgpass` lines (`host:port:database:user:password`).
Each value must still look like a secret: user names, documentation paths and placeholders stay.
"""

from __future__ import annotations

import re
from typing import Iterator, Sequence
from urllib.parse import unquote

from mtl_graph.redaction.prescan import CONTEXT, Finding, Span, finditer
from mtl_graph.redaction.rules import is_reference_or_placeholder, looks_random, name_segments

_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_SEPARATORS = re.compile(r"[-_.~]")


def is_token(value: str, min_length: int = 16) -> bool:
    """A random run of letters and digits (dashes allowed between long runs), or a UUID: what a token looks like,
    and what user names, words joined by dashes and dates do not."""
    if _UUID.fullmatch(value):
        return True
    if len(value) < min_length or not looks_random(value) or is_reference_or_placeholder(value, quoted=True):
        return False
    return max(len(part) for part in _SEPARATORS.split(value)) >= min_length


# --- a token as a URL's user ---------------------------------------------------------------------------------------

URL_TOKEN_USER = re.compile(r"(?<![\w+.-])[a-zA-Z][\w+.-]*://(?P<value>[\w~-]{16,})@[\w\[]")


def url_user_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """`https://<token>@host`: a user name that is a token (a PAT for git, a feed token for pip)."""
    for m in finditer(URL_TOKEN_USER, text, spans):
        if is_token(m["value"]):
            yield Finding(m.start("value"), m.end("value"), "url_credentials", CONTEXT)


# --- webhook URLs ----------------------------------------------------------------------------------------------------

WEBHOOK = re.compile(r"https?://(?:hooks\.[\w.-]+|[\w.-]+(?::\d+)?(?:/[\w.~%-]+)*?/(?:webhooks?|hooks|webhookb2))"
                     r"/(?P<value>[^\s?#\"'<>\\`]+)")


_ID_PART = re.compile(r"[A-Za-z0-9]*\d[A-Za-z0-9]*")
MIN_HOOK_ID = 12
"""On a webhook host, the id parts of the path (each holding a digit) that together make a capability."""


def webhook_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """The path after a webhook URL's `hooks` segment: whoever holds it can post to the channel. On a host that
    only serves webhooks (`hooks.<host>`: Slack, Zapier) the path is the capability even when no single part of it
    is long: an account number and a short hook id (`catch/6920945/wr5bdb/`) together."""
    for m in finditer(WEBHOOK, text, spans):
        value = m["value"].rstrip("/.,;:)]}")
        parts = re.split(r"[/@]", value)
        on_hook_host = m[0].split("://", 1)[1].startswith("hooks.")
        ids = sum(len(p) for p in parts if _ID_PART.fullmatch(p))
        if any(is_token(part) for part in parts) or (on_hook_host and ids >= MIN_HOOK_ID):
            yield Finding(m.start("value"), m.start("value") + len(value), "webhook", CONTEXT)


# --- query strings -------------------------------------------------------------------------------------------------

QUERY = re.compile(r"[?&;](?P<name>[\w.%-]+)=(?P<value>[^&\s#\"'<>\\`]+)")
_QUERY_WORDS = {"key": "api_key", "sig": "signature", "signature": "signature"}


def query_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """`?key=`, `&sig=`, `X-Amz-Signature=`, `X-Goog-Signature=`: a random value under a signing name."""
    for m in finditer(QUERY, text, spans):
        words = name_segments(unquote(m["name"]))
        if words and words[-1] in _QUERY_WORDS and is_token(unquote(m["value"]).rstrip("="), 16):
            yield Finding(m.start("value"), m.end("value"), _QUERY_WORDS[words[-1]], CONTEXT)


# --- positional passwords ------------------------------------------------------------------------------------------

CALL = re.compile(r"(?:(?<![\w.])(?P<func>(?:[A-Za-z_]\w*\.)*(?P<name>connect|login|simple_bind_s|simple_bind|bind_s|"
                  r"HTTPBasicAuth|HTTPDigestAuth|BasicAuth|PlainCredentials|set_password|Connection|pass_|FTP|FTP_TLS|"
                  r"Redis|StrictRedis))[ \t]*|(?<!\w)auth[ \t]*=[ \t]*)\(")
# A string argument may have escaped quotes (the call inside a JSON string of a log).
_ARG = re.compile(r"[ \t]*(?:(?P<kw>[A-Za-z_]\w*)[ \t]*=(?!=)[ \t]*)?(?:[rRbBuU]{0,2}(?P<q>\\?[\"'])"
                  r"(?P<s>(?:(?!(?P=q))(?:\\.|[^\\\n]))*)(?P=q)|(?P<other>[^,()\"'\n]*(?:\([^()\n]*\)[^,()\"'\n]*)*))"
                  r"[ \t]*(?P<end>[,)])")
# Index of the password among the positional arguments (negative: from the end); `None` where it depends on them.
_PASSWORD_AT = {"login": 1, "simple_bind_s": 1, "simple_bind": 1, "bind_s": 1, "HTTPBasicAuth": 1,
                "HTTPDigestAuth": 1, "BasicAuth": 1, "PlainCredentials": 1, "set_password": -1, "pass_": 0,
                "Connection": 2, "FTP": 2, "FTP_TLS": 2, "Redis": 3, "StrictRedis": 3, "": 1, "connect": None}
_MIN_ARGS = {"Connection": 3, "set_password": 1}


def _positional(text: str, pos: int) -> list[re.Match[str]]:
    """The positional arguments of the call whose `(` ends at pos, up to its first keyword argument."""
    args = []
    for _ in range(8):
        m = _ARG.match(text, pos)
        if m is None or m["kw"]:
            break
        args.append(m)
        if m["end"] == ")":
            break
        pos = m.end()
    return args


def _password_index(func: str, name: str, args: list[re.Match[str]]) -> int | None:
    if name == "connect":
        # Oracle's drivers take (user, password, dsn); paramiko (host, port, user, password); MySQL's (host, user,
        # password, db). sqlite3, psycopg2 and sockets take one argument.
        if "oracle" in func.lower():
            return 1
        if len(args) > 1 and args[1]["other"] and args[1]["other"].strip().isdigit():
            return 3
        return 2
    at = _PASSWORD_AT[name]
    return at if at >= 0 else len(args) + at


def positional_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """The password literal of `pymysql.connect("db", "app", "<pw>")`, `smtp.login(user, "<pw>")`, `auth=(u, "<pw>")`."""
    for m in finditer(CALL, text, spans):
        name = m["name"] or ""
        args = _positional(text, m.end())
        if len(args) < max(_MIN_ARGS.get(name, 2), 1):
            continue
        index = _password_index(m["func"] or "", name, args)
        if index is None or not 0 <= index < len(args) or args[index]["q"] is None:
            continue
        value = args[index]["s"]
        if not is_reference_or_placeholder(value, quoted=True):
            yield Finding(args[index].start("s"), args[index].end("s"), "password", CONTEXT)


# --- .pgpass -------------------------------------------------------------------------------------------------------

# The password runs to the line end (greedy: a lazy run before `[ \t]*$` is quadratic on long blank tails).
PGPASS = re.compile(r"(?m)^[ \t]*(?P<host>[\w.*-]+):(?P<port>\d{1,5}|\*):(?P<db>(?:\\.|[^:\s\\])+):"
                    r"(?P<user>(?:\\.|[^:\s\\])+):(?P<value>(?:\\.|[^\\:\n])+)$")


def pgpass_findings(text: str, spans: Sequence[Span]) -> Iterator[Finding]:
    """The last field of a `host:port:database:user:password` line."""
    for m in finditer(PGPASS, text, spans):
        value = m["value"].rstrip(" \t\r")
        if value and not is_reference_or_placeholder(value, quoted=True):
            yield Finding(m.start("value"), m.start("value") + len(value), "password", CONTEXT)
