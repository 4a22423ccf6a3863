"""OpenHands trajectories: the event stream ``save_trajectory_path`` writes (a JSON list of events), the same list
under ``trajectory`` (the server's export) or ``history`` (an evaluation ``output.jsonl`` record saved as a
file, with ``instance_id``, ``instruction``, ``metadata`` and ``test_result``), and the older ``history`` of
``[action, observation]`` pairs.

An event is an action (``action``, ``args``, ``source``, ``id``, ``message``, ``tool_call_metadata``, ``timeout``)
or an observation (``observation``, ``content``, ``extras``, ``cause`` = the id of the action it answers,
``success``); either may carry ``llm_metrics`` (``accumulated_token_usage`` with the model and token counts).
``run`` actions are shell steps (``args.command``; the observation's ``extras.metadata.exit_code``, or
``extras.exit_code`` in older files), ``run_ipython`` steps run ``args.code``, other tools (``edit``, ``read``,
``browse``, MCP calls) are ``name({json args})`` under their function name. User ``message`` actions are the
requests (the first is the task), agent messages and ``think`` the reasoning, ``finish`` the submission
(``final_thought``); the last final agent state (``finished``, ``error``, ``stopped``) is the exit status.
The outcome is unknown unless an evaluation record says ``resolved``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from mtl_graph.core.trajectory import Step, TokenUsage, Trajectory
from mtl_graph.importers.common import (FileImport, TrajectoryImportError, dig, given_verdict,
                                                   render_call, stem, text_of, usage_of)
from mtl_graph.importers.registry import Importer, register
from mtl_graph.importers.sessions import (Calls, LineErrors, head_records, is_prompt, json_records,
                                                     parse_args, session_task)

OPENHANDS = "openhands"
OPENHANDS_EVAL = "openhands-eval"
_HOLDERS = ("history", "trajectory")
_SKIPPED = {"system", "recall", "condensation", "condensation_request", "change_agent_state", "null", "pause",
            "resume", "message", "think", "finish", "reject"}
_NOISE = {"thought", "confirmation_state", "security_risk", "impl_source", "hidden", "blocking", "is_input",
          "is_static", "cwd", "wait_for_response", "image_urls", "file_urls", "translated_ipython_code",
          "include_extra", "kernel_init_code", "reasoning_content"}
_NO_RESULT = {"null", "recall", "think", "condensation", "message"}
_END_STATES = {"finished", "error", "stopped", "rejected"}


def is_event(obj: Any) -> bool:
    """An OpenHands event dict: an action with its ``args`` or an observation with its ``extras`` / ``content``."""
    if not isinstance(obj, dict):
        return False
    if isinstance(obj.get("action"), str) and isinstance(obj.get("args"), dict):
        return True
    return isinstance(obj.get("observation"), str) and ("extras" in obj or "cause" in obj or "content" in obj)


def _flat(items: list[Any]) -> list[Any]:
    """Events in order; an older ``[action, observation]`` pair is its two events (an empty half is dropped)."""
    out = []
    for item in items:
        if isinstance(item, list) and len(item) == 2:
            out.extend(e for e in item if e != {})
        else:
            out.append(item)
    return out


def event_list(data: Any) -> list[Any] | None:
    """The events of a trajectory document, or None when it holds none (every item must be an event)."""
    items = data
    if isinstance(data, dict):
        items = next((data[k] for k in _HOLDERS if isinstance(data.get(k), list)), None)
    if not isinstance(items, list) or not items:
        return None
    events = _flat(items)
    return events if events and all(is_event(e) for e in events) else None


def _exit_code(event: dict[str, Any]) -> int | None:
    code = dig(event, "extras", "metadata", "exit_code")
    code = dig(event, "extras", "exit_code") if code is None else code
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _called(event: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments the model gave the tool call, from the response kept in ``tool_call_metadata``: an edit's
    action keeps only some of them (its ``command`` and ``file_text`` are in the call alone)."""
    meta = event.get("tool_call_metadata")
    choices = dig(meta, "model_response", "choices")
    for choice in choices if isinstance(choices, list) else []:
        calls = dig(choice, "message", "tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and call.get("id") == meta.get("tool_call_id"):
                args, _ = parse_args(dig(call, "function", "arguments"))
                return args
    return None


class _Stream:
    """Steps, requests and the end of the run, collected in event order."""

    def __init__(self) -> None:
        self.calls = Calls()
        self.prompts: list[str] = []
        self.thought: list[str] = []
        self.submission: str | None = None
        self.exit_status: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: Any = None

    def action(self, event: dict[str, Any]) -> None:
        kind, args, source = event["action"], event["args"], event.get("source")
        text = text_of(args.get("content")).strip()
        if kind == "message" and source == "user" and is_prompt(text):
            self.prompts.append(text)
        elif kind == "message" and text:
            self.thought.append(text)
            self.submission = text
        elif kind == "think" and str(args.get("thought") or "").strip():
            self.thought.append(str(args["thought"]).strip())
        elif kind == "finish":
            final = args.get("final_thought") or args.get("thought")  # older files: the thought
            self.submission = str(final or "").strip() or self.submission
            self.exit_status = "finished"
        elif kind == "reject":
            self.exit_status = "rejected"
        if kind in _SKIPPED:
            return
        thought = "\n".join([*self.thought, str(args.get("thought") or "").strip()]).strip() or None
        if kind == "run" and isinstance(args.get("command"), str):
            step = Step(reasoning=thought, action=args["command"], tool="bash", args={"command": args["command"]})
        elif kind == "run_ipython" and isinstance(args.get("code"), str):
            step = Step(reasoning=thought, action=args["code"], tool="ipython", args={"code": args["code"]})
        else:
            name = str(dig(event, "tool_call_metadata", "function_name") or kind)
            clean = _called(event)
            if clean is None:  # no model response kept: the action's own fields, less the bookkeeping
                clean = {k: v for k, v in args.items() if k not in _NOISE and v not in (None, "")}
            step = Step(reasoning=thought, action=render_call(name, clean), tool=name, args=clean)
        self.thought, self.submission = [], None
        self.calls.add(step, event.get("id"))

    def observation(self, event: dict[str, Any]) -> None:
        if event["observation"] == "agent_state_changed":
            state = dig(event, "extras", "agent_state")
            self.exit_status = state if state in _END_STATES else self.exit_status
            return
        if "cause" not in event and event["observation"] in _NO_RESULT:
            return  # what answers a message or a thought in an older file's pairs
        # without a cause (older files) the result is the oldest waiting step's
        self.calls.resolve(event.get("cause"), text_of(event.get("content")), _exit_code(event))


def parse_openhands(data: Any, path: Path, default_id: str | None = None) -> list[Trajectory]:
    """The one run of a trajectory document (its id: the instance's, the issue's, else default_id or the file's)."""
    events = event_list(data)
    if events is None:
        raise TrajectoryImportError(path, f"not an {OPENHANDS} trajectory (a list of events)")
    record = data if isinstance(data, dict) else {}
    stream = _Stream()
    for event in events:
        if isinstance(event.get("llm_metrics"), dict):
            stream.usage = dig(event, "llm_metrics", "accumulated_token_usage") or stream.usage
        stream.model = dig(event, "tool_call_metadata", "model_response", "model") or stream.model
        if "action" in event:
            stream.action(event)
        else:
            stream.observation(event)
    prompts = stream.prompts or ([str(record["instruction"])] if isinstance(record.get("instruction"), str)
                                 and record["instruction"].strip() else [])
    if not prompts:
        raise TrajectoryImportError(path, "no message from the user (no task to learn from)")
    try:
        tokens = usage_of(stream.usage, "llm_metrics.accumulated_token_usage") if stream.usage else TokenUsage()
    except ValueError as exc:
        raise TrajectoryImportError(path, str(exc)) from None
    model = (dig(stream.usage, "model") or stream.model or dig(record, "metadata", "llm_config", "model")
             or dig(record, "metadata", "model_name"))
    test_result = record.get("test_result") if isinstance(record.get("test_result"), dict) else {}
    patch = test_result.get("git_patch") or record.get("git_patch")
    submission = patch if isinstance(patch, str) and patch.strip() else None
    issue = record.get("issue") if isinstance(record.get("issue"), dict) else {}  # the resolver's records
    named = f"{issue.get('owner')}/{issue.get('repo')}#{issue.get('number')}" if issue.get("number") else None
    task = session_task(str(record.get("instance_id") or named or default_id or stem(path)), prompts,
                        agent=dig(record, "metadata", "agent_class"))
    return [Trajectory(task=task, steps=stream.calls.steps, submission=submission or stream.submission,
                       model=str(model) if model else None, tokens=tokens, exit_status=stream.exit_status,
                       verdict=given_verdict(record, test_result, dig(test_result, "report")))]


@register
class OpenHandsImporter(Importer):
    """OpenHands event-stream trajectories; asked before SWE-agent, whose ``trajectory`` key the server's export
    shares (SWE-agent steps have no ``args`` / ``extras``)."""

    name = OPENHANDS
    summary = "OpenHands trajectory `.json` event streams"
    order = 16

    def sniff(self, data: Any) -> bool:
        return event_list(data) is not None

    def parse(self, data: Any, path: Path) -> list[Trajectory]:
        return parse_openhands(data, path)


def is_eval_record(obj: Any) -> bool:
    """One line of an evaluation (or resolver) ``output.jsonl``: an object holding the events of a run."""
    return isinstance(obj, dict) and event_list(obj) is not None


def parse_eval_lines(lines: Iterable[bytes], path: Path) -> FileImport:
    """Every run of an evaluation ``output.jsonl`` (one instance per line), and one error per bad line."""
    result = FileImport(path)
    errors = LineErrors(result)
    for n, obj in json_records(lines, errors):
        try:
            result.runs.extend(parse_openhands(obj, path, f"{stem(path)}:{n}"))
        except TrajectoryImportError as exc:
            errors.add(exc.reason, n)
            continue
        result.lines.append(n)
    errors.close()
    return result


@register
class OpenHandsEvalImporter(Importer):
    """OpenHands evaluation outputs (``output.jsonl``: ``instance_id``, ``instruction``, ``history``,
    ``metadata``, ``test_result`` per line) and resolver outputs (``issue``, ``history``, ``git_patch``,
    ``success``); one such record saved alone is an `OpenHandsImporter` document."""

    name = OPENHANDS_EVAL
    summary = "OpenHands evaluation `output.jsonl` files"
    order = 17
    jsonl = True

    def sniff_lines(self, lines: list[str]) -> bool:
        objs = head_records(lines, limit=5)
        return bool(objs) and all(is_eval_record(o) for o in objs)

    def parse_lines(self, lines: Iterable[bytes], path: Path) -> FileImport:
        return parse_eval_lines(lines, path)
