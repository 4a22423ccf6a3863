"""Aider's chat history, ``.aider.chat.history.md``: the markdown log aider appends to in the repository root.

Aider writes ``# aider chat started at <time>`` when it starts (one session, one run), each line the user typed
as ``#### <line>``, its own messages (the launch banner, ``Running <command>``, ``Applied edit to <file>``,
``Tokens: 2.4k sent, 34 received``, lint errors, confirmations) as ``> <line>``, and the model's replies as plain
markdown between them; both prefixed kinds end with the two spaces of a markdown line break, which tells a user
line from a ``####`` heading, or a note from a ``>`` quote, inside a reply.

Steps: a command the user ran (``/run``, ``/test``, ``!``) and each suggested shell command aider ran
(``> Running <command>``) have that command as the action, and an edit aider applied is ``edit <file>``; the
``>`` lines after a step are its observation. The commands' own output goes to the terminal and not into the
history (aider notes only "Added N lines of output to the chat"), so an observation holds what the history
has. The reply text before a step is its reasoning, the last reply the submission; the first request is the
task, later ones ``follow_ups``; the model is the banner's ``Main model``; the outcome is unknown.

The history is read line by line (the registry's line-streamed mode): a line that is not UTF-8 costs itself. A
history whose sessions were all opened and closed without a request holds no run and is skipped as such.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from mtl_graph.core.trajectory import Step, TokenUsage, Trajectory
from mtl_graph.importers.common import FileImport, NotARunError
from mtl_graph.importers.registry import Importer, register
from mtl_graph.importers.sessions import LineErrors, is_prompt, numbered_lines, session_task

AIDER = "aider"
_START = re.compile(r"^# aider chat started at (.+?)\s*$")
_RUN = re.compile(r"^(?:/run|/test|!)\s*(.+)$", re.S)
_ASK = re.compile(r"^/(?:ask|code|architect|context)\b\s*(.*)$", re.S)
_MODEL = re.compile(r"^(?:Main model|Model): (\S+)")
_TOKENS = re.compile(r"^Tokens: ([\d.]+)([kM]?) sent, .*?([\d.]+)([kM]?) received")
_CONFIRM = re.compile(r"\(Y\)es/\(N\)o")
_SCALE = {"": 1, "k": 1_000, "M": 1_000_000}


def looks_like_aider(lines: list[str]) -> bool:
    """A chat history: a session header among the first lines."""
    return any(_START.match(line.rstrip("\r")) for line in lines[:200])


def _tokens(m: re.Match[str]) -> TokenUsage:
    return TokenUsage(input=round(float(m[1]) * _SCALE[m[2]]), output=round(float(m[3]) * _SCALE[m[4]]))


class _Session:
    """One "chat started" block, read line by line."""

    def __init__(self, started: str, line: int) -> None:
        self.started, self.line = started, line
        self.steps: list[Step] = []
        self.prompts: list[str] = []
        self.user: list[str] = []
        self.reply: list[str] = []
        self.open: Step | None = None
        self.thought: list[str] = []
        self.banner = True
        self.model: str | None = None
        self.tokens = TokenUsage()
        self.submission: str | None = None

    def feed(self, text: str) -> None:
        body = text.rstrip()
        broken = text.endswith("  ")  # aider's markdown line break: its own lines, not the reply's
        in_reply = any(line.strip() for line in self.reply)
        if body.startswith("#### ") or body == "####":
            if broken or not in_reply:
                return self.user_line(body[5:])
        elif body.startswith("> ") or body == ">":
            if broken or not in_reply:
                return self.note(body[2:])
        self.end_user()
        self.open = None
        self.banner = False
        self.reply.append(body)

    def user_line(self, line: str) -> None:
        self.end_reply()
        self.thought = []  # a reply the user answered is no step's reasoning
        self.open, self.banner = None, False
        self.user.append("" if line == "<blank>" else line)

    def end_user(self) -> None:
        if not self.user:
            return
        text, self.user = "\n".join(self.user).strip(), []
        run, ask = _RUN.match(text), _ASK.match(text)
        if run:
            self.step(Step(action=run[1].strip(), tool="bash"))
        elif ask and ask[1].strip():
            self.prompts.append(ask[1].strip())
        elif text and not text.startswith("/") and is_prompt(text):
            self.prompts.append(text)

    def end_reply(self) -> None:
        text, self.reply = "\n".join(self.reply).strip(), []
        if text:
            self.thought.append(text)
            self.submission = text

    def step(self, step: Step) -> None:
        step.reasoning = "\n\n".join(self.thought) or None
        self.thought, self.submission = [], None
        self.steps.append(step)
        self.open = step

    def note(self, line: str) -> None:
        self.end_user()
        self.end_reply()
        if self.banner and self.model is None and _MODEL.match(line):
            self.model = _MODEL.match(line)[1]
        if (tokens := _TOKENS.match(line)) is not None:
            self.tokens += _tokens(tokens)
            return
        if line.startswith("Running "):
            command = line[len("Running "):].strip()
            if self.open is not None and self.open.observation.endswith(command):  # the confirmation's subject
                self.open.observation = self.open.observation[: -len(command)].rstrip("\n")
            return self.step(Step(action=command, tool="bash"))
        if line.startswith("Applied edit to "):
            target = line[len("Applied edit to "):].strip()
            return self.step(Step(action=f"edit {target}", tool="edit", args={"path": target}, observation=line))
        if self.open is not None and not _CONFIRM.search(line):
            self.open.observation = f"{self.open.observation}\n{line}" if self.open.observation else line

    def run(self, path: Path) -> Trajectory | None:
        self.end_user()
        self.end_reply()
        if not self.prompts:
            return None
        where = path.parent.name or AIDER
        task = session_task(f"{where}@{self.started}", self.prompts, started_at=self.started)
        return Trajectory(task=task, steps=self.steps, submission=self.submission, model=self.model,
                          tokens=self.tokens)


def parse_aider(lines: Iterable[bytes], path: Path) -> FileImport:
    """Every session of a chat history with a request in it, and one error per unreadable line or empty
    session."""
    result = FileImport(path)
    errors = LineErrors(result)
    session: _Session | None = None

    def close() -> None:
        run = session.run(path) if session is not None else None
        if run is not None:
            result.runs.append(run)
            result.lines.append(session.line)
        elif session is not None and (session.steps or session.reply):
            errors.add("a session with no request from the user (no task to learn from)", session.line)

    for n, text, _ in numbered_lines(lines, errors, blank=True):
        start = _START.match(text)
        if start:
            close()
            session = _Session(start[1], n)
        elif session is not None and (text.strip() or session.reply):
            session.feed(text)
    close()
    errors.close()
    if not result.runs and not result.errors and session is not None:
        raise NotARunError(path, "not a run: no session of the chat history holds a request (aider was opened and "
                                 "closed)")
    return result


@register
class AiderImporter(Importer):
    """Aider's markdown chat history (a text log, streamed line by line like the JSONL formats)."""

    name = AIDER
    summary = "Aider `.aider.chat.history.md` chat histories"
    order = 18
    jsonl = True
    file_patterns = (".aider.chat.history.md",)  # aider's default --chat-history-file, in the repository root

    def sniff(self, data: Any) -> bool:
        return False  # a JSON document is never a markdown history

    def sniff_lines(self, lines: list[str]) -> bool:
        return looks_like_aider(lines)

    def parse_lines(self, lines: Iterable[bytes], path: Path) -> FileImport:
        return parse_aider(lines, path)
