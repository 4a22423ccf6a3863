"""Every secret rule with the triggers the pre-scan runs for it (see `secret_prescan` for how a trigger is written).

A trigger is a necessary condition on the line where its rule can match: a vendor prefix, the end of a secret
name, a URL's `://...@`. Most are a literal the rule's own pattern starts with or must contain; where a rule checks
a name with `is_secret_name`, the trigger is `SECRET_NAME_END` (every name it accepts ends that way). A rule added
here without a sound trigger makes the fast path miss what the full path finds, and
`tests/redaction/test_redaction_fast_path.py` fails on the generated corpus.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

from mtl_graph.redaction import detectors
from mtl_graph.redaction import rules
from mtl_graph.redaction import shapes
from mtl_graph.redaction.encoded import encoded_findings, secret_document_findings
from mtl_graph.redaction.prescan import (
    D, SECRET_NAME, SECRET_NAME_END, SPACE, W, Rule, Trigger, trigger,
)


def _name_then(separator: str) -> tuple[Trigger, ...]:
    """A secret name ending right before separator (the syntax a rule reads after its `name` group)."""
    return trigger(SECRET_NAME + separator, caseless=True)


# The literal each vendor pattern of `secret_rules.VENDOR_PATTERNS` starts with (or, for Sentry's DSN, holds).
VENDOR_TRIGGERS = {
    "anthropic_key": r"sk-ant-", "openai_key": r"sk-", "github_token": r"gh[pousr]_|github_pat_",
    "huggingface_token": r"hf_|api_org_", "google_api_key": r"AIza", "google_oauth": r"ya29\.|GOCSPX-",
    "npm_token": r"npm_", "pypi_token": r"pypi-AgE", "stripe": r"[sr]k_(?:live|test)_|whsec_",
    "slack_token": r"xox[abposre]-|xapp-", "gitlab_token": r"gl(?:pat|dt|rt|ptt|cbt|imt|soat|ft|agent|oas)-",
    "digitalocean_token": r"do[por]_v1_", "shopify_token": r"shp(?:at|ca|pa|ss)_", "databricks_token": r"dapi",
    "mailgun_key": r"key-", "linear_key": r"lin_api_", "sentry_dsn": r"://[0-9a-f]{32}@", "openrouter_key": r"sk-or-",
    "groq_key": r"gsk_", "replicate_token": r"r8_", "xai_key": r"xai-", "perplexity_key": r"pplx-",
    "vault_token": r"hv[sb]\.", "atlassian_token": r"ATATT3", "postman_key": r"PMAK-", "grafana_token": r"glsa_",
    "newrelic_key": r"NRAK-", "doppler_token": r"dp\.", "supabase_token": r"sbp_", "age_secret_key": r"AGE-SECRET-KEY-",
    "jwt": r"eyJ", "aws_access_key": r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA|IPA)",
}

# detect-secrets' keyword-anchored plugins (IBM, Cloudant, Softlayer) share one assignment shape.
_PLUGIN_ASSIGNMENT = r"(?:key|pwd|pw|password|pass|token)[\"']?\]?[ ]*(?:=|:|:=|=>|::|[ ]+)[ ]*[\"']?[a-z0-9_-]{24}"
PLUGIN_TRIGGERS = {
    "ArtifactoryDetector": (rf"AKC[a-zA-Z0-9]{{10}}|AP[{D}A-F][a-zA-Z0-9]{{8}}", False),
    "AWSKeyDetector": (r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}|aws", True),
    "AzureStorageKeyDetector": (r"AccountKey=", False),
    "CloudantDetector": (rf"{_PLUGIN_ASSIGNMENT}|\.cloudant\.com", True),
    "DiscordBotTokenDetector": (rf"[MNO][a-zA-Z{D}_-]{{23,}}\.[a-zA-Z{D}_-]{{6,}}\.[a-zA-Z{D}_-]{{27}}", False),
    "GitHubTokenDetector": (r"gh[pousr]_", False),
    "GitLabTokenDetector": (r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941", False),
    "IbmCloudIamDetector": (_PLUGIN_ASSIGNMENT, True),
    "IbmCosHmacDetector": (_PLUGIN_ASSIGNMENT, True),
    "JwtTokenDetector": (r"eyJ", False),
    "MailchimpDetector": (r"-us[0-9]", False),
    "NpmDetector": (r"_authToken=", False),
    "OpenAIDetector": (r"T3BlbkFJ", False),
    "PypiTokenDetector": (r"pypi-AgE", False),
    "SendGridDetector": (r"SG\.", False),
    "SlackDetector": (r"xox[abposr]-|hooks\.slack\.com/services/", True),
    "SoftlayerDetector": (rf"{_PLUGIN_ASSIGNMENT}|api.softlayer.com/soap/", True),
    "SquareOAuthDetector": (r"sq0csp-", False),
    "StripeDetector": (r"[rs]k_live_", False),
    "TelegramBotTokenDetector": (rf"[{D}]{{8,}}:[0-9A-Za-z_-]{{35}}", False),
    "TwilioKeyDetector": (r"AC[a-z0-9]{32}|SK[a-z0-9]{32}", False),
}
# detect-secrets' keyword detector (only secret names count, so SECRET_NAME_END is on the line too): a denylisted word, then an assignment and an opening quote (`password = "`,
# `secret: '`, `key_pass...  "x";`), or a comparison before it (`"x" == password`). SP: what `\s` matches in a line.
_DENIED = r"(?:key|pass|pwd|secret|contrase)"
_SP = r"[\t\v\f\r \x1c-\x1f\x80-\xff]*"
_KEYWORD = (rf"{_DENIED}[{W}]*[\]\"']{{0,2}}{_SP}(?::|={{1,3}}|!==?|=>){_SP}[\"'`]|{_DENIED}[^{SPACE}]*{_SP}[\"'`]"
            rf"|[!=]{{2}}{_SP}[{W}]*{_DENIED}")
# The entropy detectors: a quoted run of 20 base64 / hex characters on a line that talks about secrets.
_TALK = r"(?:secret|token|passw|api.?key|private|credential|auth)"
_RUN = r"[\"'][A-Za-z0-9+/\\_=-]"
_ENTROPY = rf"{_TALK}[^\n]*{_RUN}{{20}}|{_RUN}{{20}}[^\n]*{_TALK}|{_RUN}*{_TALK}"
# NpmDetector's `\s*` may reach the next line.
_PLUGIN_AFTER = {"NpmDetector": 1}


def catalog(secret_kind: Callable[[str], str | None] | None = None) -> list[Rule]:
    """All built-in rules. secret_kind (the redactor's own scan of a text) enables decoding base64 values."""
    c = rules.CONTEXT_PATTERNS
    value = rules.value_findings
    out = [
        Rule("private_key", rules.private_key_findings, trigger(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY"), whole=True),
        Rule("putty_key", rules.putty_findings, trigger(rf"Private-Lines: [{D}]"), whole=True),
        *(Rule(f"vendor:{kind}", partial(rules.vendor_findings, pattern, kind), trigger(VENDOR_TRIGGERS[kind]))
          for kind, pattern in rules.VENDOR_PATTERNS),
        Rule("assignment_line", partial(value, c[0]), _name_then(r"[\"']?[ \t]*[=:]")),
        Rule("quoted_value", partial(value, c[1]), _name_then(r"[\"'\]]?[ \t]*(?:[=:]|!=|\?\?=)")),
        Rule("escaped_quoted_value", partial(value, c[2]), _name_then(r"(?:\\[\"'])?[ \t]*[=:]")),
        Rule("inline_assignment", partial(value, c[3]), _name_then("=")),
        Rule("netrc_redis", partial(value, c[4]), trigger(rf"(?:password|passwd|requirepass|masterauth)[ \t]+[^{SPACE}]")),
        Rule("env_list", partial(value, c[5]), trigger(rf"name:[^\n]*{SECRET_NAME}[\"']?[ \t]*\r?$", True),
             after=1),
        Rule("flag_value", partial(value, c[6]), trigger(rf"-[{W}-]*{SECRET_NAME}(?:=|[ \t])", True)),
        Rule("flag_phrase", partial(value, c[7]), trigger(rf"-[{W}-]*{SECRET_NAME}(?:=|[ \t])", True)),
        *(Rule(f"command_password:{i}", partial(value, p, kind="password", need_name=False),
               trigger(r"mysql|mariadb|docker|podman|buildah|nerdctl|skopeo|sshpass|redis-cli"))
          for i, p in enumerate(rules.COMMAND_PASSWORDS)),
        Rule("url_credentials", rules.url_credential_findings,
             trigger(rf"://[^{SPACE}:/@?#\[\]\"']*:[^{SPACE}/@?#\"']+@")),
        Rule("curl_user", partial(value, rules.CURL_USER, kind="url_credentials", need_name=False),
             trigger(rf"(?:-u|--user|--proxy-user)[ \t]+[\"']?[^{SPACE}:\"']+:")),
        Rule("auth_header", partial(value, rules.AUTH_HEADER, kind="bearer_token", need_name=False),
             trigger(r"authori[sz]ation", caseless=True)),
        Rule("header", rules.header_findings, _name_then(rf"[\"']?:[ \t]*[^{SPACE}\"',;]{{8}}")),
        Rule("bearer", rules.bearer_findings, trigger(rf"(?:bearer|token)[ \t]+[{W}.~+/-]{{16}}", caseless=True)),
        Rule("basic", rules.basic_findings, trigger(r"basic[ \t]+[A-Za-z0-9+/]{8}", caseless=True)),
        Rule("cookie", rules.cookie_findings, trigger(r"cookie[\"']?[ \t]*:", caseless=True)),
        Rule("url_token_user", shapes.url_user_findings, trigger(rf"://[{W}~-]{{16,}}@")),
        Rule("secret_document", secret_document_findings,
             trigger(r"^[ \t]*(?:data|stringData):[ \t]*\r?$|\"(?:data|stringData)\"[ \t]*:[ \t]*\{")),
        Rule("webhook", shapes.webhook_findings, trigger(r"/(?:webhooks?|hooks|webhookb2)/|://hooks\.")),
        Rule("query_signature", shapes.query_findings,
             trigger(rf"[?&;][{W}.%-]*(?:key|sig|signature|%)[{W}.%-]*=", caseless=True)),
        Rule("positional_password", shapes.positional_findings,
             trigger(r"(?:connect|login|bind|bind_s|BasicAuth|DigestAuth|PlainCredentials|set_password|Connection"
                     r"|pass_|FTP|FTP_TLS|Redis)[ \t]*\(|auth[ \t]*=[ \t]*\(")),
        Rule("pgpass", shapes.pgpass_findings,
             trigger(rf"^[ \t]*[^{SPACE}:]+:(?:[{D}]+|\*):(?:\\.|[^{SPACE}:\\])+:(?:\\.|[^{SPACE}:\\])+:")),
        *(Rule(f"plugin:{type(p).__name__}", partial(detectors.plugin_findings, p),
               trigger(*PLUGIN_TRIGGERS[type(p).__name__]), after=_PLUGIN_AFTER.get(type(p).__name__, 0))
          for p in detectors.plugins()[0]),
        Rule("keyword", detectors.keyword_findings, (Trigger(SECRET_NAME_END, True), Trigger(_KEYWORD, True))),
        Rule("entropy", detectors.entropy_findings, trigger(_ENTROPY, caseless=True)),
    ]
    if secret_kind is not None:
        # Any base64 run not glued to one before it; a wrapped block's last line may be short (after=1).
        out.append(Rule("encoded", partial(encoded_findings, secret_kind),
                        trigger(r"(?:^|[^A-Za-z0-9+/])[A-Za-z0-9+/]{16}"), after=1))
    return out
