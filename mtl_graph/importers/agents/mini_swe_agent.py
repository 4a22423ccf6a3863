"""mini-swe-agent trajectories: v1 and v2 ``.traj.json`` files (``{"info", "messages", "trajectory_format"}``) and
bare message lists (its test-data shape).

Actions come from, in order of trust: ``extra.actions`` (v2 records what it executed), OpenAI tool calls (v2
tool-call mode), or the text of the reply, parsed as mini does: exactly one block of the first action syntax
that appears — ```` ```mswea_bash_command ```` fences (v2 text mode), ``<mswea_bash_command>`` tags (v2 XML
configs), ```` ```bash ```` fences (v1), ``<bash_code>`` tags (v1 XML). A reply with another number of blocks
drew a format error and ran nothing, so it is no step.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mtl_graph.importers.common import (TrajectoryImportError, dig, given_verdict,
                                                   render_call, stem, text_of, usage_of)
from mtl_graph.importers.agents.langchain import message_list
from mtl_graph.importers.mini_observation import parse_observation
from mtl_graph.importers.registry import Importer, register
from mtl_graph.importers.task_text import task_text
from mtl_graph.core.trajectory import Step, TokenUsage, Trajectory
from mtl_graph.core.task import TaskRef

MINI_SWE_AGENT = "mini-swe-agent"

ACTION_PATTERNS = (
    re.compile(r"```mswea_bash_command\s*\n(.*?)\n```", re.S),
    re.compile(r"<mswea_bash_command>(.*?)</mswea_bash_command>", re.S),
    re.compile(r"```bash\s*\n(.*?)\n```", re.S),
    re.compile(r"<bash_code>(.*?)</bash_code>", re.S),
)
_SUBMIT_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")


def text_actions(content: str) -> tuple[list[str], str]:
    """(the reply's action, as mini would execute it, or none; the reply without its action blocks)."""
    for pattern in ACTION_PATTERNS:
        found = pattern.findall(content)
        if found:
            return ([found[0].strip()] if len(found) == 1 else []), pattern.sub("", content).strip()
    return [], content.strip()


def looks_like_mini_messages(msgs: list[Any]) -> bool:
    """A role-dict list written by mini: its extra records, its observation blocks, or its action syntax."""
    if not msgs or not all(isinstance(m, dict) and "role" in m for m in msgs):
        return False
    for m in msgs:
        content = text_of(m.get("content"))
        if isinstance(m.get("extra"), dict) or m.get("role") == "exit":
            return True
        if m.get("role") in ("user", "tool") and "<returncode>" in content:
            return True
        if m.get("role") == "assistant" and any(p.search(content) for p in ACTION_PATTERNS):
            return True
    return False


def _call_action(call: Any) -> tuple[str, str | None]:
    """A tool call as (action, call id); malformed argument JSON is kept as written (mini refused to run it)."""
    name = dig(call, "function", "name") or "bash"
    raw = dig(call, "function", "arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else (raw or {})
    except ValueError:
        args = None
    if not isinstance(args, dict):
        return f"{name}({raw})", None  # no tool message answers a call mini refused
    return render_call(name, args), call.get("id") if isinstance(call, dict) else None


class _Run:
    """Steps collected while walking the messages: each action waits for its observation."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.pending: list[tuple[Step, str | None]] = []
        self.tokens = TokenUsage()
        self.submission: str | None = None
        self.exit_status: str | None = None

    def assistant(self, msg: dict[str, Any], n: int) -> None:
        content = text_of(msg.get("content"))
        self.tokens += usage_of(dig(msg, "extra", "response", "usage") or msg.get("usage"), f"messages[{n}].usage")
        recorded = dig(msg, "extra", "actions")
        if isinstance(recorded, list):  # v2 records what it executed (nothing, after a format error)
            actions = [(str(a.get("command", "")), a.get("tool_call_id")) for a in recorded if isinstance(a, dict)]
            thought = content.strip() if msg.get("tool_calls") else text_actions(content)[1]
        elif msg.get("tool_calls"):
            actions, thought = [_call_action(c) for c in msg["tool_calls"]], content.strip()
        else:
            found, thought = text_actions(content)
            actions = [(a, None) for a in found]
        self.pending = []
        for i, (action, call_id) in enumerate(actions):
            step = Step(reasoning=(thought or None) if i == 0 else None, action=action.strip())
            self.steps.append(step)
            if call_id is not None or not msg.get("tool_calls"):
                self.pending.append((step, call_id))

    def observation(self, msg: dict[str, Any]) -> None:
        if dig(msg, "extra", "interrupt_type") == "FormatError" or not self.pending:
            return
        call_id = msg.get("tool_call_id")
        index = next((i for i, (_, cid) in enumerate(self.pending) if cid == call_id), None) if call_id else 0
        if index is None:
            return  # an answer to a call that never ran (mini refused its malformed arguments)
        step, _ = self.pending.pop(index)
        text, code, rendered = parse_observation(msg)
        if not rendered and any(marker in step.action for marker in _SUBMIT_MARKERS):
            self.submission = text  # v1 answers the submit command with the submission itself
            return
        step.observation, step.exit_code = text, code

    def exit(self, msg: dict[str, Any]) -> None:
        extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
        self.exit_status = extra.get("exit_status") or text_of(msg.get("content")) or None
        self.submission = extra.get("submission") or self.submission


def parse_mini(data: Any, path: Path) -> list[Trajectory]:
    """The one run of a mini-swe-agent trajectory file or bare message list."""
    if not (isinstance(data, dict) or (isinstance(data, list) and looks_like_mini_messages(data))):
        raise TrajectoryImportError(path, f"a {MINI_SWE_AGENT} log is a JSON object or a list of its messages")
    info = data.get("info") if isinstance(data, dict) and isinstance(data.get("info"), dict) else {}
    messages = [m for m in (message_list(data) or []) if isinstance(m, dict)]
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    if first_user is None:
        raise TrajectoryImportError(path, "no user message with the task")
    run = _Run()
    start = messages.index(first_user) + 1
    for n, msg in enumerate(messages[start:], start):
        role = msg.get("role")
        if role == "assistant":
            try:
                run.assistant(msg, n)
            except ValueError as exc:  # a token count that is not one
                raise TrajectoryImportError(path, str(exc)) from None
        elif role in ("user", "tool"):
            run.observation(msg)
        elif role == "exit":
            run.exit(msg)
    model = dig(info, "config", "model", "model_name") or dig(info, "config", "model", "model")
    instance = data.get("instance_id") if isinstance(data, dict) else None
    task = TaskRef(id=str(instance or info.get("instance_id") or stem(path)),
                   instruction=task_text(text_of(first_user.get("content"))))
    submission = info.get("submission") or run.submission or None
    return [Trajectory(task=task, steps=run.steps, submission=submission,
                       verdict=given_verdict(info, data if isinstance(data, dict) else None),
                       model=model, tokens=run.tokens, exit_status=info.get("exit_status") or run.exit_status)]


@register
class MiniSWEAgentImporter(Importer):
    """mini-swe-agent's ``.traj.json`` files (v1 and v2) and bare message lists; asked before LangChain, whose
    role-dict lists these also are."""

    name = MINI_SWE_AGENT
    summary = "mini-swe-agent `.traj.json` files and message lists"
    order = 30

    def sniff(self, data: Any) -> bool:
        if isinstance(data, dict) and str(data.get("trajectory_format", "")).startswith(MINI_SWE_AGENT):
            return True
        msgs = message_list(data)
        if not msgs:
            return False
        return looks_like_mini_messages(msgs) or (isinstance(data, dict) and isinstance(data.get("info"), dict)
                                                  and all(isinstance(m, dict) and "role" in m for m in msgs))

    def parse(self, data: Any, path: Path) -> list[Trajectory]:
        return parse_mini(data, path)
