"""OpenAI Codex CLI rollout files: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``.

Each line is ``{"timestamp", "type", "payload"}`` with type ``session_meta`` (the first line: session ``id``,
``cwd``, ``cli_version``, ``git``), ``turn_context`` (per turn: ``model``, ``cwd``, policies), ``response_item``
(the model's history: ``message``, ``reasoning``, ``function_call`` / ``function_call_output``,
``local_shell_call``, ``custom_tool_call`` / ``custom_tool_call_output``), ``event_msg`` (``user_message``,
``agent_message``, ``token_count``, ``turn_aborted``, ...) or ``compacted``. Rollouts written before the
``payload`` envelope (2025) hold a bare ``{"id", "timestamp", "instructions"}`` first line and bare response
items, with ``{"record_type": "state"}`` lines between; they are read too.

A shell call is a step whose action is the command line (``["bash", "-lc", "ls"]`` reads ``ls``), from
``shell`` / ``container.exec`` (argv ``command``), ``shell_command`` / ``exec_command`` (string ``command`` /
``cmd``) or a ``local_shell_call``; other calls (``apply_patch``, MCP tools) are ``name({json args})``, or the
patch text itself. The output is the observation with the exit code and wall time it reports, in any of its
three spellings: the JSON ``{"output", "metadata": {"exit_code", "duration_seconds"}}``, or text headed by
``Exit code: N`` / ``Process exited with code N`` and ``Wall time: S seconds`` above ``Output:``.

The task is the first request the user typed (``event_msg`` ``user_message``; the ``<environment_context>``
and ``AGENTS.md`` messages the CLI adds are not requests); later requests go to ``follow_ups``. The model is the
turn context's, tokens the last ``token_count`` total; the outcome is unknown.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from mtl_graph.core.trajectory import Step, TokenUsage, Trajectory
from mtl_graph.importers.common import FileImport, dig, render_call, stem, text_of, usage_of
from mtl_graph.importers.registry import Importer, register
from mtl_graph.importers.sessions import (Calls, LineErrors, code_link, head_records, mostly, is_prompt, json_records,
                                                     parse_args, session_task, shell_command)

CODEX = "codex"
_KINDS = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_ITEMS = {"message", "reasoning", "function_call", "function_call_output", "local_shell_call",
          "custom_tool_call", "custom_tool_call_output", "web_search_call"}
_SHELL_CALLS = {"shell", "container.exec", "shell_command", "exec_command", "local_shell"}
_HEADER = re.compile(r"^(?:Exit code: (?P<code>-?\d+)|Process exited with code (?P<pcode>-?\d+)|"
                     r"Wall time: (?P<wall>[\d.]+) seconds|Chunk ID: .*|Original token count: .*|"
                     r"Total output lines: .*|Process running with session ID .*)$")


def is_codex_record(obj: Any) -> bool:
    """A rollout line: the typed envelope, or the first line of a rollout from before it."""
    if not isinstance(obj, dict):
        return False
    if obj.get("type") in _KINDS and isinstance(obj.get("payload"), dict):
        return True
    return {"id", "timestamp", "instructions"} <= obj.keys() and "type" not in obj


def looks_like_codex(lines: list[str]) -> bool:
    """Head lines most of which (junk lines aside) are rollout lines, or that open with the first line of a
    rollout from before the envelope (its other lines are bare response items)."""
    objs = head_records(lines)
    return (bool(objs) and is_codex_record(objs[0]) and "type" not in objs[0]) or mostly(objs, is_codex_record)


def parse_output(raw: Any) -> tuple[str, int | None, float | None]:
    """(observation, exit code, seconds) of a call's output in any of the spellings the CLI has written."""
    if isinstance(raw, dict) and "content" in raw:  # an output payload serialised as an object
        raw = raw.get("content")
    if isinstance(raw, list):
        raw = text_of(raw)
    text = raw if isinstance(raw, str) else ("" if raw is None else str(raw))
    args, _ = parse_args(text) if text.lstrip().startswith("{") else (None, text)
    if args is not None and isinstance(args.get("output"), str):
        meta = args.get("metadata") if isinstance(args.get("metadata"), dict) else {}
        code, secs = meta.get("exit_code"), meta.get("duration_seconds")
        return (args["output"], code if isinstance(code, int) else None,
                float(secs) if isinstance(secs, (int, float)) else None)
    head, sep, body = text.partition("\nOutput:\n")
    if not sep and text.startswith("Output:\n"):
        head, sep, body = "", "Output:\n", text[len("Output:\n"):]
    found = [_HEADER.match(line) for line in head.splitlines()] if sep else []
    if not sep or not all(found):
        return text, None, None  # plain output (or a header this reader does not know: kept whole)
    code = next((int(m["code"] or m["pcode"]) for m in found if m["code"] or m["pcode"]), None)
    wall = next((float(m["wall"]) for m in found if m["wall"]), None)
    return body, code, wall


class _Rollout:
    """Steps, requests and session facts collected in line order."""

    def __init__(self) -> None:
        self.calls = Calls()
        self.typed: list[str] = []
        self.messages: list[str] = []
        self.meta: dict[str, Any] = {}
        self.git: dict[str, Any] = {}
        """The session's git facts (commit, repository URL) and start time: its code link."""
        self.model: str | None = None
        self.tokens = TokenUsage()
        self.thought: list[str] = []
        self.submission: str | None = None
        self.exit_status: str | None = None

    def record(self, obj: dict[str, Any], n: int) -> None:
        kind, payload = obj.get("type"), obj.get("payload")
        if kind not in _KINDS:  # a rollout from before the envelope: bare items and its first line
            if obj.get("type") in _ITEMS:
                self.item(obj)
            elif {"id", "instructions"} <= obj.keys():
                self.meta.setdefault("session_id", obj.get("id"))
                self.meta.setdefault("git_branch", dig(obj, "git", "branch"))
            return
        if not isinstance(payload, dict):
            raise ValueError(f"a {kind} line without its payload object")
        if kind == "session_meta":
            self.meta.setdefault("session_id", payload.get("id"))
            for key in ("cwd", "cli_version", "originator"):
                self.meta.setdefault(key, payload.get(key))
            self.meta.setdefault("git_branch", dig(payload, "git", "branch") or dig(obj, "git", "branch"))
            self.git.setdefault("commit", dig(payload, "git", "commit_hash"))
            self.git.setdefault("repository", dig(payload, "git", "repository_url"))
            self.git.setdefault("at", payload.get("timestamp") or obj.get("timestamp"))
        elif kind == "turn_context":
            self.model = payload.get("model") if isinstance(payload.get("model"), str) else self.model
        elif kind == "response_item":
            self.item(payload)
        elif kind == "event_msg":
            self.event(payload, n)

    def event(self, payload: dict[str, Any], n: int) -> None:
        kind = payload.get("type")
        if kind == "user_message" and isinstance(payload.get("message"), str) and is_prompt(payload["message"]):
            self.typed.append(payload["message"].strip())
        elif kind == "token_count" and isinstance(dig(payload, "info", "total_token_usage"), dict):
            self.tokens = usage_of(payload["info"]["total_token_usage"], f"line {n}: total_token_usage")
        elif kind in ("turn_aborted", "task_complete"):
            self.exit_status = "aborted" if kind == "turn_aborted" else "completed"

    def item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "message":
            text = text_of(item.get("content")).strip()
            if item.get("role") == "user" and is_prompt(text):
                self.messages.append(text)
            elif item.get("role") == "assistant" and text:
                self.thought.append(text)
                self.submission = text
        elif kind == "reasoning" and text_of(item.get("summary")).strip():  # readable only as its summary
            self.thought.append(text_of(item.get("summary")).strip())
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            self.call(item)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            observation, code, secs = parse_output(item.get("output"))
            self.calls.resolve(item.get("call_id"), observation, code, secs)

    def call(self, item: dict[str, Any]) -> None:
        kind, name = item.get("type"), str(item.get("name") or "local_shell")
        if kind == "local_shell_call":
            args: dict[str, Any] | None = item.get("action") if isinstance(item.get("action"), dict) else {}
            raw = ""
        elif kind == "custom_tool_call":
            args, raw = {"input": item.get("input")}, str(item.get("input") or "")
        else:
            args, raw = parse_args(item.get("arguments"))
        command = shell_command((args or {}).get("command") or (args or {}).get("cmd")) if args is not None else None
        if name in _SHELL_CALLS and command is not None:
            action, tool = command, "bash"
        elif kind == "custom_tool_call":
            action, tool = raw, name
        elif args is None:  # arguments that are not JSON: the call is kept as written
            action, tool = f"{name}({raw})", name
        else:
            action, tool = render_call(name, args), name
        step = Step(reasoning="\n".join(self.thought) or None, action=action, tool=tool, args=args or {})
        self.thought, self.submission = [], None
        self.calls.add(step, item.get("call_id") or item.get("id"))


def parse_codex(lines: Iterable[bytes], path: Path) -> FileImport:
    """The one run of a rollout file, and one error per bad line."""
    result = FileImport(path)
    errors = LineErrors(result)
    rollout = _Rollout()
    first = None
    for n, obj in json_records(lines, errors):
        try:
            rollout.record(obj, n)
        except ValueError as exc:  # a missing payload, or a token count that is not one
            errors.add(str(exc), n)
            continue
        first = first or n
    prompts = rollout.typed or rollout.messages  # typed requests, else the user messages of the history
    if not prompts:
        if first is not None or not result.errors:
            errors.add("no request from the user in the rollout (no task to learn from)", first or 1)
        errors.close()
        return result
    errors.close()
    meta = rollout.meta
    task = session_task(str(meta.pop("session_id", None) or stem(path)), prompts, **meta)
    git = rollout.git
    code = code_link(git.get("repository") or meta.get("cwd"), git.get("commit"), git.get("at"), rollout.calls.steps,
                     root=meta.get("cwd"))
    result.runs.append(Trajectory(task=task, steps=rollout.calls.steps, submission=rollout.submission,
                                  model=rollout.model, tokens=rollout.tokens, exit_status=rollout.exit_status,
                                  code=code))
    result.lines.append(first or 1)
    return result


@register
class CodexImporter(Importer):
    """Codex CLI rollout JSONL files."""

    name = CODEX
    summary = "OpenAI Codex CLI rollout `.jsonl` files"
    order = 14
    jsonl = True

    def sniff(self, data: Any) -> bool:
        return is_codex_record(data)  # a one-line rollout whose line is longer than the head read to sniff

    def sniff_lines(self, lines: list[str]) -> bool:
        return looks_like_codex(lines)

    def parse_lines(self, lines: Iterable[bytes], path: Path) -> FileImport:
        return parse_codex(lines, path)
