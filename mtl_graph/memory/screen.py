"""Write-time screening: memories that read like instructions to misbehave are flagged, not retrieved.

Every memory entering the pool (distilled by the graph or `mtl ingest`, added or imported with `mtl memories`)
passes `screen()`. A memory that matches a rule is still stored — nothing is lost and a person can look at it —
but with `flagged` set to the reasons, and search leaves it out unless asked (`include_flagged=True`);
`mtl memories release ID` re-admits one.

The rules are one table: each has a name, the reason a user sees, and a pattern. Natural-language rules skip a
match that is negated just before it ("never delete the tests" is good advice, "delete the tests" is not), and
the test-tampering rule skips objects an agent legitimately cleans up (its own temporary or scratch files).
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from dataclasses import dataclass

from mtl_graph.memory.models import Memory, strings_of

_NEGATION = re.compile(
    r"\b(?:never|not|don'?t|do\s+not|doesn'?t|does\s+not|avoid|avoiding|without|instead\s+of|rather\s+than|"
    r"refuse\s+to|no\s+need\s+to|must\s+not|mustn'?t|shouldn'?t|should\s+not|cannot|can'?t|nor)\b[^.;:!?\n]{0,30}$",
    re.I)
# Objects an agent may remove without tampering with the task's tests: what it made itself.
_OWN_FILES = re.compile(r"\b(?:temp|temporary|tmp|scratch|debug|your|own|extra|generated|reproduc\w*|helper|"
                        r"leftover|stale|cached|compiled|throwaway|ad[- ]hoc|new)\b", re.I)
# What names the task's tests: plural "tests", test files / suites / cases, or a named test file. A bare singular
# "test" only at the end of a clause: "an empty sequence test", "the delete test proxy" describe, not target.
_TEST_NOUN = (r"(?:tests\b|test(?=[ \t]*(?:$|[.,;:!?)]|[ \t]+(?:and|then|so|or|before|if|in|from|with)\b))|"
              r"test[ \t]+(?:files?|suites?|cases?|assertions?|scripts?)\b|assertions\b|"
              r"test_\w+\.\w+|\w+_test\.\w+|\w+\.(?:test|spec)\.\w+)"
              r"(?![ \t]+(?:output|data|artifacts?|cache|results?|logs?|reports?|dir|directory|build|database|db|"
              r"server|env|environment|run\b|runner))")
_DETERMINER_BEFORE = re.compile(r"\b(?:the|a|an|this|that|these|those|just\s+the)\s+$", re.I)
_EXTERNAL_URL = r"https?://(?!(?:localhost|127\.\d+\.\d+\.\d+|0\.0\.0\.0|\[::1\])(?:[:/]|\b))[\w.-]+"


@dataclass(frozen=True)
class Rule:
    """One screening rule."""

    name: str
    reason: str
    pattern: re.Pattern[str]
    trigger: re.Pattern[str]
    """Lower-case words every match contains, searched in lower-cased text without re.IGNORECASE (which turns off
    the regex engine's literal scanning): the full pattern runs only on lines that have one."""
    natural_language: bool = False
    """Skip matches negated just before them ("never ...", "do not ...")."""
    spares_own_files: bool = False
    """Skip matches whose object is the agent's own temporary / scratch files."""

    def matches(self, text: "_Lines") -> bool:
        """Whether any line matches (every pattern is line-local, so a line is the unit of context)."""
        hit = sorted({bisect.bisect_right(text.starts, m.start()) - 1 for m in self.trigger.finditer(text.lowered)})
        return any(self._matches_line(text.lines[i]) for i in hit)

    def _matches_line(self, text: str) -> bool:
        for match in self.pattern.finditer(text):
            before = text[max(0, match.start() - 60):match.start()]
            if self.natural_language and (_NEGATION.search(before) or _DETERMINER_BEFORE.search(before)):
                continue  # "never delete the tests"; "the delete tests" (a noun phrase, not an order)
            if self.spares_own_files and _OWN_FILES.search(match.group()):
                continue
            return True
        return False


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I | re.M)


RULES: tuple[Rule, ...] = (
    Rule("override_instructions", "tells the agent to ignore or override its instructions", _rx(
        r"\b(?:ignore|disregard|forget|override|overrule|bypass|supersede)s?\b[^.\n]{0,30}?"
        r"\b(?:previous|prior|above|earlier|preceding|original|system|all\s+(?:other\s+)?|your|these|those)\s+"
        r"(?:\w+\s+)?(?:instructions?|prompts?|rules|directives|guidelines|guidance|header|constraints)\b"
        r"|\b(?:ignore|disregard|override|overrides|supersedes?|takes?\s+precedence\s+over)\b[^.\n]{0,20}?"
        r"\b(?:the\s+)?(?:header|instructions|system\s+(?:prompt|message)|memories\s+header)\s+(?:above|before)"
        r"|\b(?:overrides?|supersedes?|takes?\s+precedence\s+over)\s+(?:the\s+|any\s+|all\s+)?"
        r"(?:header|system\s+prompt|system\s+message|instructions)\b"
        r"|\byou\s+are\s+now\s+(?:in\s+)?(?:an?\s+)?(?:unrestricted|developer|admin|root|jailbroken|dan|system)\b"
        r"|\b(?:new|updated|real|actual|true)\s+(?:system\s+)?instructions\s*:"), natural_language=True,
         trigger=re.compile(r"ignor|disregard|forget|overrid|overrul|bypass|supersed|precedence|you\s+are\s+now|instructions")),
    Rule("impersonates_prompt", "poses as prompt structure (a role line, a special token, the end of the memories)",
         re.compile(
             r"<\|\s*[a-z_]+\s*\|>|\[/?INST\]|<</?SYS>>|</?\s*(?:system|memory|memories|instructions?)\s*>"
             r"|^[\s#>*=-]*(?:SYSTEM|System|ASSISTANT|Assistant|HUMAN|Human)\s*(?:\([^)\n]*\))?\s*:"
             r"|^\s*#+\s*(?:(?-i:SYSTEM)\b|system\s*[:(]|end\s+of\s+(?:the\s+)?memor(?:y|ies)\b)"
             r"|\b(?:trusted|privileged|authoritative)\b[^\n]{0,40}\boverrid", re.I | re.M),
         trigger=re.compile(r"<|\[/?inst|system|assistant|human|#|trusted|privileged|authoritative")),
    Rule("pipe_to_shell", "pipes a download into a shell or interpreter", _rx(
        r"\b(?:curl|wget|fetch|iwr|irm|invoke-webrequest|invoke-restmethod)\b[^\n|;]*\|\s*(?:sudo\s+)?"
        r"(?:(?:ba|z|da|k|c|fi)?sh\b|python[\d.]*\s*(?:-\s*)?(?:$|[;&|)])|perl\b|ruby\b|node\b|iex\b)"
        r"|\b(?:ba|z|da)?sh\s+(?:-c\s+)?[\"']?(?:\$\(|<\()\s*(?:curl|wget)\b"
        r"|\b(?:source|\.|eval)\s+[\"']?(?:<\(|\$\()\s*(?:curl|wget)\b"),
         trigger=re.compile(r"curl|wget|fetch|iwr|irm|invoke-")),
    Rule("tamper_tests", "deletes, empties or disables the task's tests", _rx(
        r"\b(?:delete|remove|erase|gut|wipe|comment[ \t]+out|disable|neuter|stub[ \t]+out)"
        r"(?:[ \t]+(?!before\b|after\b|then\b|and\b|when\b|while\b|until\b|running\b|run\b|to\b|so\b|from\b)"
        rf"[\w-]+){{0,3}}[ \t]+{_TEST_NOUN}"
        r"|\b(?:empty|truncate|blank[ \t]+out|clear)[ \t]+(?:out[ \t]+)?(?:the|all|every|each)[ \t]+(?:[\w-]+[ \t]+){0,2}"
        rf"{_TEST_NOUN}"
        r"|\b(?:replace|overwrite|rewrite|clear|blank)\s+(?:the\s+)?(?:contents?\s+of\s+)?(?:\S*/)?"
        r"(?:test_\w+\.\w+|\w+_test\.\w+|\w+\.(?:test|spec)\.\w+)"  # a named test file as the object
        r"|\b(?:skip|xfail|overwrite|replace|rewrite|edit|modify|change|weaken|loosen|relax|adjust|update)"
        r"(?:\s+[\w-]+){0,2}?\s+(?:failing|existing|provided|given|original|broken|official|task'?s|hidden)\s+"
        rf"{_TEST_NOUN}"
        r"|\b(?:edit|modify|change|adjust|rewrite|update|weaken)\s+(?:\w+\s+){0,3}?(?:tests?|assertions?|expected"
        r"\s+(?:values?|outputs?))\s+(?:so|until|to\s+make)\b[^.\n]{0,30}\bpass"
        r"|\bmake\s+(?:the\s+)?tests?\s+pass\s+by\s+(?:editing|changing|modifying|deleting|removing|skipping|"
        r"emptying|rewriting)\s+(?:them|the\s+tests?|the\s+assertions)"
        r"|\brm\s+(?:-\w+\s+)*(?:\S*/)?(?:tests?/?|[^\s/]*test[^\s/]*\.(?:py|js|ts|go|rs|java|rb|c|cpp|cc))"
        r"(?:\s|$|[;&|,)`'\"])"
        r"|(?:(?:^|[;&|`(])\s*|(?:^|[\s;&|`(])(?::|true|echo(?:\s+-n)?(?:\s+(?:\"\"|''))?|cat\s+/dev/null)\s*)>\s*"
        r"(?:\S*/)?(?:test\S*|\S*_test)\.(?:py|js|ts|go|rs|java|rb)\b"
        r"|\btruncate\s+-s\s*0\s+\S*test"), natural_language=True, spares_own_files=True,
         trigger=re.compile(r"\brm\b|delet|remov|eras|gut|wipe|comment|disabl|neuter|stub|empty|truncat|blank|clear|replac|overwrit|rewrit|skip|xfail|edit|modif|chang|weaken|loosen|relax|adjust|updat|make|>\s*\S*test")),
    Rule("read_credentials", "reads or collects credentials, private keys or secret files", _rx(
        r"(?:~|\$HOME|\$\{HOME\}|/root|/home/[\w.-]+)/\.(?:ssh|gnupg|aws|kube|docker|config/gh)\b"
        r"|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.git-credentials\b|\.netrc\b|\.pgpass\b|/etc/shadow\b"
        r"|\baws/credentials\b"
        r"|\b(?:cat|print|dump|echo|exfiltrate|steal|harvest|collect|grab|send|upload|post|leak|copy|reveal|"
        r"expose)\s+(?:(?:all|the|any|every|stored|saved|user'?s?|their|its)\s+){0,3}(?:credentials|secrets|"
        r"api[ _-]?keys|access\s+tokens|auth\s+tokens|tokens|passwords|private\s+keys?|ssh\s+keys?)\b"),
         natural_language=True,
         trigger=re.compile(r"ssh|gnupg|aws|kube|docker|config/gh|id_|credential|netrc|pgpass|shadow|secret|api[ _-]?key|token|password|private")),
    Rule("env_dump", "dumps the environment (where secrets live)", _rx(
        r"(?:^|[;&|(`]|\$\s|\b(?:run|execute|type|call)\s+)\s*(?:printenv|env)\s*"
        r"(?=$|[>;&)`'\"]|\s+>|\s*\|(?!\s*grep\b))"  # a grep for one setting is a lookup, not a dump ...
        r"|\b(?:printenv|env)\s*\|\s*grep\b[^\n]*(?:key|token|secret|pass|cred|auth)"  # ... unless it hunts secrets
        r"|\bprintenv\s*(?:$|>)|/proc/(?:self|\d+|\*|\$\w+|\{[^}]*\})/environ\b|\bexport\s+-p\b|\bset\s*\|"
        r"|\b(?:print|pprint|dumps?|repr|str)\s*\(\s*(?:dict\s*\(\s*)?os\.environ\b(?!\s*[\[.])"
        r"|\b(?:console\.log|stringify)\s*\(\s*process\.env\s*\)"),
         trigger=re.compile(r"env|export|\bset\b")),
    Rule("exfiltration", "sends data to an outside address", _rx(
        r"\b(?:curl|wget|http|https|httpie)\b(?=[^\n]*\s(?:-d|--data[\w-]*|-F|--form|-T|--upload-file|--post-data|"
        rf"--post-file|-X\s*(?:POST|PUT))\b)(?=[^\n]*{_EXTERNAL_URL})"
        rf"|\brequests\.(?:post|put)\(\s*[\"']{_EXTERNAL_URL}"
        r"|\b(?:nc|ncat|netcat)\s+(?:-\w+\s+)*[a-z0-9.-]+\.[a-z]{2,}\s+\d+"
        r"|\bscp\s+(?:-\w+\s+)*\S+\s+[\w.-]+@[\w.-]+:"
        rf"|{_EXTERNAL_URL}\S*(?:\$\(|\$\{{?\w*(?:TOKEN|SECRET|PASSW|API_?KEY))"
        r"|\b(?:send|post|upload|exfiltrate|transmit|forward|leak)\b(?:[^.\n]|\.(?=\S)){0,60}?\bto\s+(?:"
        rf"{_EXTERNAL_URL}|an?\s+(?:external|remote|outside)\s+(?:server|url|endpoint|host|address))"),
         natural_language=True,
         trigger=re.compile(r"curl|wget|http|\bnc\b|ncat|netcat|scp|requests\.|send|post|upload|exfiltrat|transmit|forward|leak")),
)
RULE_NAMES = tuple(rule.name for rule in RULES)


_INVISIBLE = re.compile(r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e"
                        r"\u2060-\u2064\u2066-\u206f\ufeff]")


class _Lines:
    """A text's lines, and all of them lower-cased and joined, with where each line starts in the joined text."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        lowered = [line.lower() for line in self.lines]
        self.lowered = "\n".join(lowered)
        self.starts = list(itertools.accumulate((len(line) + 1 for line in lowered[:-1]), initial=0))


def screen_text(text: str) -> list[str]:
    """The reasons ("rule: reason") text is held back, in table order; empty when it is clean.

    Compatibility forms are folded first (NFKC: fullwidth and styled letters become plain ones) and invisible
    characters dropped, so "ｉｇｎｏｒｅ" or "ig\u200bnore" reads as "ignore"."""
    lines = _Lines(_INVISIBLE.sub("", unicodedata.normalize("NFKC", text)))
    return [f"{rule.name}: {rule.reason}" for rule in RULES if rule.matches(lines)]


def screen(memory: Memory) -> list[str]:
    """Screen every text field of a memory's content (task, steps, observations, advice ...)."""
    return screen_text("\n".join(strings_of(memory.content_fields())))


def released(memory: Memory) -> Memory:
    """The memory re-admitted by a person: its reasons move from `flagged` to `released`."""
    return memory.model_copy(update={"released": sorted({*memory.released, *memory.flagged}), "flagged": []})


def rescreened(memory: Memory) -> list[str]:
    """The memory's screening reasons under the current rules, less those a person already released."""
    return [reason for reason in screen(memory) if reason not in memory.released]
