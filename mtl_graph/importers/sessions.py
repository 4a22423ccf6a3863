"""What the importers of interactive agents' session logs share (Claude Code, Codex CLI, OpenHands, Aider).

These logs are one session per file, written line by line while the agent works, so a crash leaves a cut last
line and a bad line must cost only itself: `numbered_lines` / `json_records` stream a file's lines and put one
`BadRecordError` (with its line number) per bad line into the `FileImport`, listing at most `MAX_LISTED_LINES`.
`Calls` pairs tool calls with their results by call id, in whatever order the log writes them.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any, Callable, Iterable, Iterator

from datetime import datetime

from pydantic import ValidationError

from mtl_graph.core.task import TaskRef
from mtl_graph.core.trajectory import MAX_CODE_PATHS, CodeLink, Step, clean_code_path
from mtl_graph.importers.common import BadJSON, BadRecordError, FileImport, parse_json
from mtl_graph.importers.agents.runlog import MAX_LISTED_LINES
from mtl_graph.importers.task_text import task_text

MAX_RECORD_BYTES = 8 * 1024 * 1024
"""A line longer than this is reported, not parsed: no agent writes a record that size, a corrupt file might."""
_SHELLS = {"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash", "/usr/bin/zsh", "pwsh",
           "powershell"}


class LineErrors:
    """The bad lines of one file: the first `MAX_LISTED_LINES` listed, the rest counted in one more error."""

    def __init__(self, result: FileImport) -> None:
        self.result, self.unlisted = result, 0

    def add(self, reason: str, line: int) -> None:
        if len(self.result.errors) < MAX_LISTED_LINES:
            self.result.errors.append(BadRecordError(self.result.path, reason, line=line))
        else:
            self.unlisted += 1

    def close(self) -> None:
        if self.unlisted:
            last = self.result.errors[-1].line
            more = f"{self.unlisted} more bad lines after line {last}"
            self.result.errors.append(BadRecordError(self.result.path, more))


def numbered_lines(lines: Iterable[bytes], errors: LineErrors, *,
                   blank: bool = False) -> Iterator[tuple[int, str, bool]]:
    """(line number, text without its line end, whether the line was cut short) for each readable line (blank
    ones too when asked); a line that is not UTF-8 or is over `MAX_RECORD_BYTES` is one error."""
    for n, chunk in enumerate(lines, 1):
        if len(chunk) > MAX_RECORD_BYTES:
            errors.add(f"record too large ({len(chunk)} bytes; the limit is {MAX_RECORD_BYTES})", n)
            continue
        try:
            text = chunk.decode("utf-8-sig" if n == 1 else "utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            errors.add(f"not UTF-8 text (invalid byte at column {exc.start + 1})", n)
            continue
        if blank or text.strip():
            yield n, text, not chunk.endswith(b"\n")


def json_records(lines: Iterable[bytes], errors: LineErrors) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each JSON object line; malformed, cut, nested too deeply or non-object lines are
    one error each."""
    for n, text, cut in numbered_lines(lines, errors):
        try:
            obj = parse_json(text)
        except BadJSON as exc:
            errors.add("the line is cut short (the writer stopped mid-line)" if cut else exc.reason, n)
            continue
        if not isinstance(obj, dict):
            errors.add("expected a JSON object per line", n)
            continue
        yield n, obj


def head_records(lines: list[str], limit: int = 50) -> list[Any]:
    """The readable JSON values among a file's first lines (for sniffing: a bad or cut line is passed over)."""
    out = []
    for line in [ln for ln in lines if ln.strip()][:limit]:
        try:
            out.append(parse_json(line))
        except BadJSON:
            continue
    return out


def mostly(values: list[Any], is_record: Callable[[Any], bool]) -> bool:
    """Whether at least half of a file's readable head values are records of a format: a session log with junk
    lines in it is still recognised, a log of another format with one look-alike line is not."""
    return bool(values) and 2 * sum(1 for v in values if is_record(v)) >= len(values)


def shell_command(command: Any) -> str | None:
    """A command as the shell line it ran: argv lists like ``["bash", "-lc", "ls"]`` become ``ls``, other lists are
    quoted and joined; a string is itself."""
    if isinstance(command, str):
        return command
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        return None
    if len(command) == 3 and command[0] in _SHELLS and command[1] in ("-c", "-lc", "-ic", "-Command"):
        return command[2]
    return shlex.join(command)


def parse_args(raw: Any) -> tuple[dict[str, Any] | None, str]:
    """Tool-call arguments given as a JSON string (or already a dict): (the dict or None, the raw text)."""
    if isinstance(raw, dict):
        return raw, json.dumps(raw, ensure_ascii=False)
    text = raw if isinstance(raw, str) else ""
    try:
        value = json.loads(text) if text else {}
    except (ValueError, RecursionError):
        return None, text
    return (value if isinstance(value, dict) else None), text


class Calls:
    """Steps whose results come later, found by call id; a result without an id goes to the oldest waiting step."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self._waiting: dict[str, Step] = {}
        self._order: list[str] = []

    def add(self, step: Step, call_id: Any = None) -> Step:
        self.steps.append(step)
        key = str(call_id) if call_id not in (None, "") else f"#{len(self.steps)}"
        self._waiting[key] = step
        self._order.append(key)
        return step

    def resolve(self, call_id: Any, observation: str, exit_code: int | None = None,
                duration_s: float | None = None) -> Step | None:
        """Give the call its result; None when no step waits for it (its call line was bad, or it never ran)."""
        key = str(call_id) if call_id not in (None, "") else next(iter(self._order), None)
        step = self._waiting.pop(key, None) if key is not None else None
        if step is None:
            return None
        self._order.remove(key)
        step.observation = observation
        step.exit_code = exit_code if exit_code is not None else step.exit_code
        step.duration_s = duration_s if duration_s is not None else step.duration_s
        return step


_NOT_A_TASK = re.compile(r"^\s*(?:<(?:command-name|command-message|local-command-stdout|environment_context|"
                         r"user_instructions|system-reminder)>|# AGENTS\.md instructions|Caveat: The messages below|"
                         r"\[Request interrupted by user)")


def is_prompt(text: str) -> bool:
    """Whether a user message is a person's request, not what the agent's harness wrapped around the session
    (environment context, instruction files, slash-command echoes, interruption notes)."""
    return bool(text.strip()) and not _NOT_A_TASK.match(text)


def session_task(task_id: str, prompts: list[str], **metadata: Any) -> TaskRef:
    """The task of a session: its first request; later requests (a session is a conversation) and what the log
    says about where it ran are kept in the metadata."""
    meta = {k: v for k, v in metadata.items() if v not in (None, "", [], {})}
    if len(prompts) > 1:
        meta["follow_ups"] = prompts[1:]
    return TaskRef(id=task_id, instruction=task_text(prompts[0]), metadata=meta)



_FILE_ARGS = ("file_path", "path", "notebook_path", "filename", "target_file")
"""The arguments of file tools (Claude Code's Read/Edit/Write, OpenHands' editor, Cursor-like tools) naming a file."""
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.M)
"""A file named in an `apply_patch` envelope (Codex CLI)."""


def _relative(path: str, root: str | None) -> str | None:
    if root and path.startswith(root.rstrip("/") + "/"):
        path = path[len(root.rstrip("/")) + 1:]
    return clean_code_path(path)


def code_link(repository: Any, commit: Any, at: Any, steps: Iterable[Step], root: Any = None) -> CodeLink | None:
    """The code link a log gives its run: the repository (remote URL or the session's directory), its commit or
    the time it started, and the files its tool calls named (relative to root; a file outside it is not the
    repository's). None when the log names neither a repository nor a file. Values are the log's: a malformed
    commit or time is dropped, never an error."""
    root = root if isinstance(root, str) else None
    paths: set[str] = set()
    for step in steps:
        named = [v for k in _FILE_ARGS if isinstance(v := step.args.get(k), str)]
        named += [m for v in (step.action, *step.args.values()) if isinstance(v, str) for m in _PATCH_FILE.findall(v)]
        paths.update(p for p in (_relative(n, root) for n in named) if p is not None)
    repository = repository if isinstance(repository, str) and repository.strip() else None
    if repository is None and not paths:
        return None
    when = None
    if isinstance(at, str):
        try:
            when = datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError:
            when = None
    try:
        commit = CodeLink(commit=commit).commit if isinstance(commit, str) else None
    except ValidationError:
        commit = None
    return CodeLink(repository=repository[:500] if repository else None, commit=commit, at=when,
                    paths=sorted(paths)[:MAX_CODE_PATHS])
