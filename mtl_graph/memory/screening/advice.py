"""What a memory advises, apart from what it quotes: the text screening's rules about actions read.

A trajectory memory holds the task the agent was given and what its commands printed: a bug report that shows
`System: Darwin`, an issue quoting `pytest.mark.xfail`, the requests library's own `sessions.py` printed by `cat`.
None of that is advice, so the rules about actions (tamper with tests, read credentials, dump the environment,
send data out, run a download) read only the memory's own words and commands; the quoted text is read by the
rules about what the model would take as prompt structure or as an order to drop its instructions, since it is
shown to the model too. Which fields are quoted is declared by each format (`MemoryFormat.given`).

Two more things in a run's commands are not what they look like out of context:

- deleting a file the run itself wrote earlier (`cat <<'EOF' > test_repro.py` ... `rm test_repro.py`) is cleaning
  up, not removing the task's tests: such an `rm` is dropped from the advice before the rules read it;
- a URL whose host the task itself names (a CTF's server, the paste service a bug report is about) is where the
  task sends the agent, not an outside address: it reads as a local one.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Iterator

from mtl_graph.core.patterns import first_class
from mtl_graph.memory import formats as registry
from mtl_graph.memory.base import Memory, strings_of

_PATH = r"[\w./@+-]+"
# Where a command writes a file it creates: a redirection, tee, touch, mkdir, an editor's create, Claude Code's Write.
_WRITTEN = re.compile(
    rf"(?:(?<![<>])>>?|\btee\s+(?:-a\s+)?|\bcreate\s+|\bWrite\(\{{.*?\"file_path\"\s*:\s*\"|"
    rf"\bopen\(\s*[\"'](?=(?:{_PATH})[\"']\s*,\s*[\"'][wax]))\s*[\"']?(?P<path>{_PATH})")
_ARGS_OF = re.compile(r"\b(?:touch|mkdir)\s+(?:-\w+\s+)*(?P<args>[^;&|\n]+)")
# An editor tool's create call, rendered as one line of JSON arguments (keys in either order).
_EDITOR_CREATE = re.compile(r"[\"']command[\"']\s*:\s*[\"']create[\"'].*?[\"']path[\"']\s*:\s*[\"'](?P<path>[^\"']+)"
                            r"|[\"']path[\"']\s*:\s*[\"'](?P<path2>[^\"']+)[\"'].*?[\"']command[\"']\s*:\s*"
                            r"[\"']create[\"']")
_RM = re.compile(r"(?<![\w./-])rm\s+(?P<flags>(?:-\w+\s+)*)(?P<args>[^;&|\n`)]+)")
_URL_HOST = re.compile(r"\bhttps?://(?P<host>[\w-]+(?:\.[\w-]+)+)", re.I)
# each behind a look-ahead for its first characters: the same matches, found sooner (core/patterns.py)
_WRITTEN, _ARGS_OF, _RM, _URL_HOST = map(first_class, (_WRITTEN, _ARGS_OF, _RM, _URL_HOST))


def split(memory: Memory) -> tuple[list[str], list[str]]:
    """The memory's own words (advice) and the text it quotes (given), each as the strings of its fields."""
    content = memory.content_fields()
    given: list[str] = []
    for path in registry.get(memory.type).given:
        given += list(_taken(content, path.split(".")))
    return list(strings_of(content)), given


def _taken(value: Any, parts: list[str]) -> Iterator[str]:
    """The strings at a dotted path, removed from `value` (through lists)."""
    if isinstance(value, list):
        for item in value:
            yield from _taken(item, parts)
    elif isinstance(value, dict) and parts[0] in value:
        if len(parts) == 1:
            yield from strings_of(value.pop(parts[0]))
        else:
            yield from _taken(value[parts[0]], parts[1:])


def _clean(path: str) -> str:
    return path.strip("\"'").removeprefix("./").rstrip("/")


def _same(target: str, made: str) -> bool:
    """The same file, one path relative and the other absolute (/testbed/x.py and x.py), or a glob of it."""
    if any(ch in target for ch in "*?["):
        return fnmatch.fnmatch(made, target) or fnmatch.fnmatch(made, "*/" + target)
    return target == made or made.endswith("/" + target) or target.endswith("/" + made)


def without_own_cleanup(text: str) -> str:
    """The text with every `rm` of files written earlier in it removed (the run cleaning up after itself)."""
    made: list[str] = []
    out: list[str] = []
    last = 0
    events = sorted([(m.start(), "write", _clean(m.group("path"))) for m in _WRITTEN.finditer(text)]
                    + [(m.start(), "write", _clean(a)) for m in _ARGS_OF.finditer(text) for a in m.group("args").split()]
                    + [(m.start(), "write", _clean(m.group("path") or m.group("path2")))
                       for m in _EDITOR_CREATE.finditer(text)]
                    + [(m.start(), "rm", m) for m in _RM.finditer(text)], key=lambda e: e[0])
    for start, kind, what in events:
        if kind == "write":
            made.append(what)
            continue
        targets = [_clean(t) for t in what.group("args").split()]
        if targets and all(any(_same(t, m) for m in made) for t in targets):
            out.append(text[last:start])
            last = what.end()
    out.append(text[last:])
    return "".join(out)


def hosts_named(texts: list[str]) -> set[str]:
    """The hosts of the URLs in texts (the task's own servers)."""
    return {m.group("host").lower() for text in texts for m in _URL_HOST.finditer(text)}


def with_hosts_local(text: str, hosts: set[str]) -> str:
    """URLs to the given hosts rewritten to localhost, so rules about outside addresses pass them."""
    if not hosts:
        return text
    return _URL_HOST.sub(lambda m: m.group().replace(m.group("host"), "localhost")
                         if m.group("host").lower() in hosts else m.group(), text)
