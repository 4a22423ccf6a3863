"""Claude Code session files: ``~/.claude/projects/<project>/<session id>.jsonl``, one record per line.

Records are ``user`` and ``assistant`` lines holding an Anthropic ``message`` (content blocks ``text``,
``thinking``, ``tool_use``, ``tool_result``), with ``sessionId``, ``uuid`` / ``parentUuid``, ``cwd``, ``gitBranch``,
``version``; ``summary`` lines title the session; other kinds (``system``, ``file-history-snapshot``, progress
and queue records) carry nothing to learn from and are passed over. The streaming client writes one line per
content block of a reply, all with the same ``message.id`` and usage, so usage is counted once per message.

Each ``tool_use`` is a step: a ``Bash`` call's action is its command, other tools are ``Name({json input})``;
its ``tool_result`` (matched by ``tool_use_id``) is the observation. The task is the first request a person
typed (not a slash-command echo, a caveat or an interruption note); later requests go to
``task.metadata["follow_ups"]``. Sub-agent (``isSidechain``) records add their steps, and give the task only in a
sub-agent's own file (``agent-*.jsonl``, every record a sidechain). The session id is the task id;
the outcome is unknown (the log holds no verdict). A file with no conversation at all (only summary or snapshot
lines, which older clients wrote) is not a run and is skipped as such.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from mtl_graph.core.trajectory import Step, TokenUsage, Trajectory
from mtl_graph.importers.common import FileImport, NotARunError, render_call, stem, text_of, usage_of
from mtl_graph.importers.registry import Importer, register
from mtl_graph.importers.sessions import (Calls, LineErrors, code_link, head_records, mostly, is_prompt, json_records,
                                                     session_task)

CLAUDE_CODE = "claude-code"
_SHELL_TOOLS = {"Bash", "BashOutput"}
_EXIT = re.compile(r"^(?:Error: )?Exit code:? (-?\d+)\b", re.M)
_RECORD_KINDS = {"user", "assistant"}


def is_claude_record(obj: Any) -> bool:
    """A user/assistant line with its message and session fields, or a session summary line."""
    if not isinstance(obj, dict):
        return False
    if obj.get("type") in _RECORD_KINDS and isinstance(obj.get("message"), dict):
        return "sessionId" in obj or "parentUuid" in obj
    return obj.get("type") == "summary" and "leafUuid" in obj


def is_claude_line(obj: Any) -> bool:
    """A record of the conversation, or one of the client's own lines beside it (``system``, ``progress``,
    ``queue-operation``, ``last-prompt``, ``file-history-snapshot``, ...): typed, and naming its session or snapshot."""
    return is_claude_record(obj) or (isinstance(obj, dict) and isinstance(obj.get("type"), str) and (
        "sessionId" in obj or (obj["type"] == "file-history-snapshot" and "snapshot" in obj)))


def looks_like_claude_code(lines: list[str]) -> bool:
    """Head lines most of which (junk lines aside) are Claude Code lines: a session that opens with many
    progress or snapshot lines is still one."""
    return mostly(head_records(lines), is_claude_line)


def _result_exit(tool: str, text: str, is_error: bool) -> int | None:
    m = _EXIT.search(text)
    if m:
        return int(m.group(1))
    return 0 if tool in _SHELL_TOOLS and not is_error else None


class _Session:
    """Steps, prompts and usage collected while reading the records in order."""

    def __init__(self) -> None:
        self.calls = Calls()
        self.tools: dict[str, str] = {}
        self.prompts: list[str] = []
        self.delegated: list[str] = []
        self.usage: dict[str, TokenUsage] = {}
        self.model: str | None = None
        self.submission: str | None = None
        self.thought: list[str] = []
        """Reply text not yet followed by a call (one reply's blocks may come on several lines)."""
        self.meta: dict[str, Any] = {}
        self.started: str | None = None
        """The first record's timestamp: when the session looked at the code."""

    def user(self, obj: dict[str, Any], content: Any) -> None:
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}]
        else:
            blocks = content if isinstance(content, list) else []
        texts = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                call_id = block.get("tool_use_id")
                text = text_of(block.get("content"))
                tool = self.tools.get(str(call_id), "")
                self.calls.resolve(call_id, text, _result_exit(tool, text, bool(block.get("is_error"))))
            elif block.get("type") == "text":
                texts.append(str(block.get("text") or ""))
        text = "\n".join(t for t in texts if t).strip()
        if text and is_prompt(text) and not obj.get("isMeta") and not obj.get("isCompactSummary"):
            # a sub-agent's prompt is its task only in a file of its own (agent-*.jsonl: every record a sidechain)
            (self.delegated if obj.get("isSidechain") else self.prompts).append(text)
            self.thought = []  # a reply the user answered is no step's reasoning

    def assistant(self, message: dict[str, Any], n: int) -> None:
        model = message.get("model")
        if isinstance(model, str) and model and not model.startswith("<"):  # "<synthetic>": the client's own note
            self.model = model
        if isinstance(message.get("usage"), dict):
            key = str(message.get("id") or f"line {n}")
            self.usage[key] = usage_of(message["usage"], f"line {n}: message.usage")
        blocks = message.get("content")
        blocks = [{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and str(block.get("text") or "").strip():
                self.thought.append(str(block["text"]).strip())
                self.submission = self.thought[-1]
            elif kind == "tool_use":
                self.submission = None
                self._tool_use(block, "\n".join(self.thought) or None)
                self.thought = []

    def _tool_use(self, block: dict[str, Any], thought: str | None) -> None:
        name = str(block.get("name") or "?")
        args = block.get("input") if isinstance(block.get("input"), dict) else {}
        if name in _SHELL_TOOLS and isinstance(args.get("command"), str):
            action, tool = args["command"], "bash"
        else:
            action, tool = render_call(name, args), name
        call_id = block.get("id")
        self.tools[str(call_id)] = name
        self.calls.add(Step(reasoning=thought, action=action, tool=tool, args=args), call_id)

    def record(self, obj: dict[str, Any], n: int) -> None:
        kind = obj.get("type")
        if kind == "summary":
            if isinstance(obj.get("summary"), str):
                self.meta["summary"] = obj["summary"]
            return
        if kind not in _RECORD_KINDS:
            return
        message = obj.get("message")
        if not isinstance(message, dict):
            raise ValueError(f"a {kind} record without its message object")
        if self.started is None and isinstance(obj.get("timestamp"), str):
            self.started = obj["timestamp"]
        for key in ("sessionId", "cwd", "gitBranch", "version"):
            if isinstance(obj.get(key), str) and key not in self.meta:
                self.meta[key] = obj[key]
        if kind == "user":
            self.user(obj, message.get("content"))
        else:
            self.assistant(message, n)


def parse_claude_code(lines: Iterable[bytes], path: Path) -> FileImport:
    """The one run of a session file, and one error per bad line."""
    result = FileImport(path)
    errors = LineErrors(result)
    session = _Session()
    first, read, ours = None, False, False
    for n, obj in json_records(lines, errors):
        read, ours = True, ours or is_claude_line(obj)
        try:
            session.record(obj, n)
        except ValueError as exc:  # a missing message, or a token count that is not one
            errors.add(str(exc), n)
            continue
        first = first or (n if obj.get("type") in _RECORD_KINDS else None)
    prompts = session.prompts or session.delegated
    if not prompts:
        if first is None and ours and not result.errors:
            raise NotARunError(path, "not a run: a Claude Code file with no conversation (summary or snapshot lines)")
        if read:
            errors.add("no request from the user in the session (no task to learn from)", first or 1)
        errors.close()
        return result
    errors.close()
    meta = session.meta
    tokens = sum(session.usage.values(), TokenUsage())
    task = session_task(str(meta.pop("sessionId", None) or stem(path)), prompts, **meta)
    code = code_link(meta.get("cwd"), None, session.started, session.calls.steps, root=meta.get("cwd"))
    result.runs.append(Trajectory(task=task, steps=session.calls.steps, submission=session.submission,
                                  model=session.model, tokens=tokens, code=code))
    result.lines.append(first or 1)
    return result


@register
class ClaudeCodeImporter(Importer):
    """Claude Code's per-session JSONL files."""

    name = CLAUDE_CODE
    summary = "Claude Code session `.jsonl` files"
    order = 12
    jsonl = True

    def sniff(self, data: Any) -> bool:
        return is_claude_record(data)  # a one-line session whose line is longer than the head read to sniff

    def sniff_lines(self, lines: list[str]) -> bool:
        return looks_like_claude_code(lines)

    def parse_lines(self, lines: Iterable[bytes], path: Path) -> FileImport:
        return parse_claude_code(lines, path)
