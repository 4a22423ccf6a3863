"""Importers of agent logs: the project's run log, LangChain messages, mini-swe-agent and SWE-agent trajectories.

The format is detected from the content (file names lie: every tool writes ``.json``), and can be forced.
Every failure is a `TrajectoryImportError` naming the file (and the line, for JSONL), so a directory of mixed
logs can be imported file by file with the bad ones reported rather than aborting the batch.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from pydantic import ValidationError

from mtl_graph.experience.trajectory import Step, TokenUsage, Trajectory, Verdict, VerdictStatus
from mtl_graph.memory.models import first_validation_error
from mtl_graph.tasks import TaskRef

RUNLOG, LANGCHAIN, MINI_SWE_AGENT, SWE_AGENT = "mtl-runlog", "langchain", "mini-swe-agent", "swe-agent"
FORMATS = (RUNLOG, LANGCHAIN, MINI_SWE_AGENT, SWE_AGENT)
MAX_FILE_BYTES = 64 * 1024 * 1024
_SHELL_TOOLS = {"bash", "shell", "sh", "terminal", "run", "execute", "exec", "run_command", "execute_bash"}
_COMMAND_ARGS = ("command", "cmd", "script", "code")
_TASK_TAGS = ("pr_description", "issue", "task", "problem_statement")


class TrajectoryImportError(ValueError):
    """A log file could not be imported; the message names the file (and line)."""

    def __init__(self, path: str | Path, message: str, line: int | None = None) -> None:
        self.path, self.line, self.reason = str(path), line, message
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


@dataclass
class Loaded:
    """One imported trajectory and the file it came from."""

    path: Path
    trajectory: Trajectory


# --- reading --------------------------------------------------------------------------------------------------
def read_log_text(path: Path, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's text, or a clear error for missing, empty, huge, binary or non-UTF-8 files."""
    if not path.is_file():
        raise TrajectoryImportError(path, "no such file")
    size = path.stat().st_size
    if size == 0:
        raise TrajectoryImportError(path, "empty file")
    if size > max_bytes:
        raise TrajectoryImportError(path, f"file too large ({size} bytes; the limit is {max_bytes})")
    raw = path.read_bytes()
    if b"\x00" in raw[:8192]:
        raise TrajectoryImportError(path, "binary file, not a text log")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TrajectoryImportError(path, f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    if not text.strip():
        raise TrajectoryImportError(path, "empty file")
    return text


def iter_log_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    """The files named, with directories expanded recursively (sorted; hidden entries skipped)."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                rel = child.relative_to(path)
                if child.is_file() and not any(part.startswith(".") for part in rel.parts):
                    yield child
        else:
            yield path


# --- detection ------------------------------------------------------------------------------------------------
def _is_runlog_record(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("task"), dict) and ("steps" in obj or "record" in obj)


def _message_list(obj: Any) -> list[Any] | None:
    """The messages of a LangChain/LangGraph dump: a bare list, {"messages"}, {"values": {"messages"}}."""
    if isinstance(obj, list):
        return obj
    if isinstance(obj, dict):
        for holder in (obj, obj.get("values"), obj.get("channel_values")):
            if isinstance(holder, dict) and isinstance(holder.get("messages"), list):
                return holder["messages"]
    return None


def _looks_like_mini(obj: dict[str, Any]) -> bool:
    if str(obj.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return True
    msgs = obj.get("messages")
    return (isinstance(msgs, list) and isinstance(obj.get("info"), dict) and bool(msgs)
            and all(isinstance(m, dict) and "role" in m for m in msgs))


def detect_format(text: str) -> str | None:
    """The format name of a log's text, or None when it is none of the known ones."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        # JSONL: the head must be objects only, with at least one run record or record-tagged line
        head = [ln for ln in text.splitlines()[:50] if ln.strip()]
        try:
            objs = [json.loads(ln) for ln in head]
        except json.JSONDecodeError:
            return None
        if all(isinstance(o, dict) for o in objs) and any(_is_runlog_record(o) or "record" in o for o in objs):
            return RUNLOG
        return None
    if _is_runlog_record(obj):
        return RUNLOG
    if isinstance(obj, dict) and isinstance(obj.get("trajectory"), list):
        return SWE_AGENT
    if isinstance(obj, dict) and _looks_like_mini(obj):
        return MINI_SWE_AGENT
    msgs = _message_list(obj)
    if msgs and all(isinstance(m, dict) and ({"type", "role", "lc"} & m.keys()) for m in msgs):
        return LANGCHAIN
    return None


# --- shared helpers -------------------------------------------------------------------------------------------
def _text(content: Any) -> str:
    """Message content as text (OpenAI/Anthropic content-part lists flattened)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text", "") for p in content if isinstance(p, (str, dict))]
        return "\n".join(p for p in parts if p)
    return "" if content is None else str(content)


_PREAMBLE = re.compile(r"^\s*(?:consider the following|here is|here's|the following)[^\n]{0,80}:[ \t]*\n", re.I)


def task_text(prompt: str) -> str:
    """The task inside an agent's instance prompt (tagged blocks, SWE-agent's ISSUE: section), else all of it."""
    for tag in _TASK_TAGS:
        m = re.search(rf"<{tag}>\s*(.*?)\s*</{tag}>", prompt, re.S)
        if m and m.group(1).strip():
            return _PREAMBLE.sub("", m.group(1)).strip()
    m = re.search(r"ISSUE:\s*\n(.*?)\n\s*INSTRUCTIONS:", prompt, re.S)
    return m.group(1).strip() if m else prompt.strip()


_EXIT_RE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>|^(?:exit[ _]code|exit status|return ?code)\s*[:=]?\s*(-?\d+)",
                      re.I | re.M)


def exit_code_of(observation: str) -> int | None:
    """The exit code an observation reports, if it reports one."""
    m = _EXIT_RE.search(observation)
    return int(m.group(1) or m.group(2)) if m else None


def render_call(name: str, args: dict[str, Any]) -> str:
    """A tool call as an action: the command itself for shell tools, else name(json args)."""
    for key in _COMMAND_ARGS:
        if isinstance(args.get(key), str) and (name.lower() in _SHELL_TOOLS or len(args) == 1):
            return args[key]
    return f"{name}({json.dumps(args, ensure_ascii=False, sort_keys=True)})"


def _given_verdict(*sources: Any) -> Verdict | None:
    """A label that came with the log (resolved / success / passed), if any."""
    for src in sources:
        if not isinstance(src, dict):
            continue
        for key in ("resolved", "success", "passed", "solved"):
            if isinstance(src.get(key), bool):
                status = VerdictStatus.PASS if src[key] else VerdictStatus.FAIL
                return Verdict(status=status, reason=f"log label {key}={src[key]}", source="given")
    return None


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".traj.json", ".traj", ".jsonl", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


# --- parsers --------------------------------------------------------------------------------------------------
def _parse_runlog(text: str, path: Path) -> list[Trajectory]:
    known = set(Trajectory.model_fields)
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrajectoryImportError(path, f"malformed JSON ({exc.msg})", line=n) from None
        if not isinstance(obj, dict):
            raise TrajectoryImportError(path, "expected a JSON object per line", line=n)
        if obj.get("record", "run") != "run":
            continue  # other record kinds (events, summaries) share the log
        try:
            out.append(Trajectory.model_validate({k: v for k, v in obj.items() if k in known}))
        except ValidationError as exc:
            raise TrajectoryImportError(path, f"not a run record: {first_validation_error(exc)}", line=n) from None
    return out


def _to_messages(items: list[Any], path: Path) -> list[Any]:
    from langchain_core.load import load
    from langchain_core.messages import convert_to_messages, messages_from_dict

    out = []
    for i, item in enumerate(items):
        try:
            if isinstance(item, dict) and "lc" in item:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # `load` is flagged beta; messages-only loading is stable
                    out.append(load(item, allowed_objects="messages"))  # untrusted input: messages only
            elif isinstance(item, dict) and "data" in item and "type" in item:
                out.extend(messages_from_dict([item]))
            else:
                out.extend(convert_to_messages([item]))
        except Exception as exc:  # langchain raises ValueError/KeyError/NotImplementedError alike
            raise TrajectoryImportError(path, f"message {i} is not a chat message ({exc})") from None
    return out


def trajectory_from_messages(messages: Iterable[Any], task: TaskRef | None = None, *,
                             path: str | Path = "<messages>") -> Trajectory:
    """A run from LangChain messages (objects or dict dumps), e.g. a LangGraph thread's ``messages``.

    AI tool calls with their ToolMessages become steps; the AI text before a call is its reasoning; the last
    AI text without calls is the submission. Without a task, the first human message is the instruction.
    """
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

    items = list(messages)
    msgs = [m if isinstance(m, BaseMessage) else _to_messages([m], Path(path))[0] for m in items]
    if task is None:
        human = next((m for m in msgs if isinstance(m, HumanMessage)), None)
        if human is None:
            raise TrajectoryImportError(path, "no human message with the task")
        task = TaskRef(id=_stem(Path(path)), instruction=task_text(_text(human.content)))
    results = {m.tool_call_id: m for m in msgs if isinstance(m, ToolMessage)}
    steps, tokens, model, submission = [], TokenUsage(), None, None
    for msg in msgs:
        if not isinstance(msg, AIMessage):
            continue
        # dict dumps lose usage_metadata into additional_kwargs when converted back
        usage = msg.usage_metadata or msg.additional_kwargs.get("usage_metadata") or {}
        tokens += TokenUsage(input=usage.get("input_tokens", 0), output=usage.get("output_tokens", 0))
        model = msg.response_metadata.get("model_name") or msg.response_metadata.get("model") or model
        thought = _text(msg.content).strip() or None
        for call in msg.tool_calls:
            result = results.get(call.get("id") or "")
            obs = _text(result.content) if result is not None else ""
            steps.append(Step(reasoning=thought, action=render_call(call["name"], call["args"]), tool=call["name"],
                              args=call["args"], observation=obs, exit_code=exit_code_of(obs)))
            thought = None
        if not msg.tool_calls and thought:
            submission = thought
    return Trajectory(task=task, steps=steps, submission=submission, model=model, tokens=tokens,
                      source_format=LANGCHAIN)


def _parse_langchain(data: Any, path: Path) -> list[Trajectory]:
    from langchain_core.messages import HumanMessage

    messages = _to_messages(_message_list(data) or [], path)
    human = next((m for m in messages if isinstance(m, HumanMessage)), None)
    if human is None:
        raise TrajectoryImportError(path, "no human message with the task")
    meta = data.get("metadata", {}) if isinstance(data, dict) else {}
    task_id = (data.get("task_id") if isinstance(data, dict) else None) or meta.get("task_id") or _stem(path)
    task = TaskRef(id=str(task_id), domain=str(meta.get("domain") or "default"),
                   instruction=task_text(_text(human.content)),
                   metadata={k: v for k, v in meta.items() if k not in ("task_id", "domain")})
    run = trajectory_from_messages(messages, task, path=path)
    run.verdict = _given_verdict(data if isinstance(data, dict) else None, meta)
    return [run]


_BASH_BLOCK = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)\n?```", re.S)
_OUTPUT = re.compile(r"<output(?:_head|_tail)?>\n?(.*?)\n?</output(?:_head|_tail)?>", re.S)


def _parse_mini(data: dict[str, Any], path: Path) -> list[Trajectory]:
    messages = [m for m in data.get("messages", []) if isinstance(m, dict)]
    info = data.get("info") or {}
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    if first_user is None:
        raise TrajectoryImportError(path, "no user message with the task")
    steps: list[Step] = []
    tokens = TokenUsage()
    pending: list[Step] = []  # actions of the last assistant message awaiting their observation
    for msg in messages[messages.index(first_user) + 1:]:
        role, content = msg.get("role"), _text(msg.get("content"))
        usage = _dig(msg, "extra", "response", "usage") or msg.get("usage") or {}
        tokens += TokenUsage(input=int(usage.get("prompt_tokens", 0) or 0),
                             output=int(usage.get("completion_tokens", 0) or 0))
        if role == "assistant":
            calls = [(_dig(c, "function", "name") or "bash", _dig(c, "function", "arguments")) for c in msg.get("tool_calls") or []]
            actions = [render_call(n, json.loads(a) if isinstance(a, str) else (a or {})) for n, a in calls]
            blocks = _BASH_BLOCK.findall(content)
            # mini executes a reply only when it has exactly one block; anything else draws a format error
            actions = actions or (blocks if len(blocks) == 1 else [])
            thought = _BASH_BLOCK.sub("", content).strip() or None
            pending = [Step(reasoning=thought if i == 0 else None, action=a.strip()) for i, a in enumerate(actions)]
            steps.extend(pending)
        elif role in ("user", "tool") and pending:
            step = pending.pop(0)
            m = _OUTPUT.search(content)
            step.observation = m.group(1) if m else content
            step.exit_code = exit_code_of(content)
    model = _dig(info, "config", "model", "model_name") or _dig(info, "config", "model", "model")
    task_id = data.get("instance_id") or info.get("instance_id") or _stem(path)
    task = TaskRef(id=str(task_id), instruction=task_text(_text(first_user.get("content"))))
    return [Trajectory(task=task, steps=steps, submission=info.get("submission") or None,
                       verdict=_given_verdict(info, data), model=model, tokens=tokens,
                       exit_status=info.get("exit_status"))]


def _parse_swe_agent(data: dict[str, Any], path: Path) -> list[Trajectory]:
    info = data.get("info") or {}
    replay = data.get("replay_config")
    if isinstance(replay, str):
        try:
            replay = json.loads(replay)
        except json.JSONDecodeError:
            replay = None
    problem = _dig(replay, "problem_statement") or {}
    instruction = problem.get("text") if isinstance(problem, dict) else None
    if not instruction:
        first = next((h for h in data.get("history") or [] if isinstance(h, dict) and h.get("role") == "user"
                      and not h.get("is_demo")), None)
        instruction = task_text(_text(first.get("content"))) if first else None
    if not instruction:
        raise TrajectoryImportError(path, "no problem statement (replay_config) or user message (history)")
    steps = []
    for i, item in enumerate(data["trajectory"]):
        if not isinstance(item, dict):
            raise TrajectoryImportError(path, f"trajectory[{i}] is not an object")
        obs = _text(item.get("observation"))
        steps.append(Step(reasoning=(item.get("thought") or "").strip() or None,
                          action=str(item.get("action") or "").strip(), observation=obs,
                          exit_code=exit_code_of(obs), duration_s=item.get("execution_time")))
    stats = info.get("model_stats") or {}
    task_id = (problem.get("id") if isinstance(problem, dict) else None) or _stem(path)
    return [Trajectory(task=TaskRef(id=str(task_id), instruction=instruction.strip()), steps=steps,
                       submission=info.get("submission") or None, verdict=_given_verdict(info, data),
                       model=_dig(replay, "agent", "model", "name"),
                       tokens=TokenUsage(input=int(stats.get("tokens_sent", 0)), output=int(stats.get("tokens_received", 0))),
                       exit_status=info.get("exit_status"))]


_PARSERS: dict[str, Callable[[Any, Path], list[Trajectory]]] = {
    LANGCHAIN: _parse_langchain,
    MINI_SWE_AGENT: _parse_mini,
    SWE_AGENT: _parse_swe_agent,
}


# --- entry points ---------------------------------------------------------------------------------------------
def load_file(path: str | Path, format: str | None = None, *, domain: str | None = None,
              max_bytes: int = MAX_FILE_BYTES) -> list[Trajectory]:
    """Import one log file; domain labels runs whose log does not name one."""
    path = Path(path)
    if format is not None and format not in FORMATS:
        raise TrajectoryImportError(path, f"unknown format {format!r}; expected one of: {', '.join(FORMATS)}")
    text = read_log_text(path, max_bytes)
    fmt = format or detect_format(text)
    if fmt is None:
        if text.lstrip()[:1] in ("{", "["):
            try:
                json.loads(text)
            except json.JSONDecodeError as exc:
                raise TrajectoryImportError(path, f"malformed JSON ({exc.msg})", line=exc.lineno) from None
        raise TrajectoryImportError(path, f"unknown log format (expected one of: {', '.join(FORMATS)})")
    if fmt == RUNLOG:
        trajectories = _parse_runlog(text, path)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TrajectoryImportError(path, f"malformed JSON ({exc.msg})", line=exc.lineno) from None
        if fmt != LANGCHAIN and not isinstance(data, dict):
            raise TrajectoryImportError(path, f"a {fmt} log is a JSON object")
        if (fmt == SWE_AGENT and not isinstance(data.get("trajectory"), list)) or (
                fmt == LANGCHAIN and _message_list(data) is None):
            raise TrajectoryImportError(path, f"not a {fmt} log")
        try:
            trajectories = _PARSERS[fmt](data, path)
        except (ValidationError, TypeError, AttributeError, KeyError) as exc:
            raise TrajectoryImportError(path, f"invalid {fmt} log ({exc.__class__.__name__}: {exc})") from None
    if not trajectories:
        raise TrajectoryImportError(path, "no runs in the file")
    out = []
    for t in trajectories:
        update: dict[str, Any] = {"source_format": t.source_format or fmt}
        if domain and t.task.domain == "default":
            update["task"] = t.task.model_copy(update={"domain": domain})
        out.append(t.model_copy(update=update))
    return out


def load_trajectories(path: str | Path, format: str | None = None, *, domain: str | None = None,
                      max_bytes: int = MAX_FILE_BYTES) -> list[Trajectory]:
    """Import a file, or every file of a directory; the first bad file raises."""
    return [t for f in iter_log_files([path]) for t in load_file(f, format, domain=domain, max_bytes=max_bytes)]


def load_many(paths: Iterable[str | Path], format: str | None = None, *, domain: str | None = None,
              max_bytes: int = MAX_FILE_BYTES) -> tuple[list[Loaded], list[TrajectoryImportError]]:
    """Import files and directories leniently: good runs, and one error per bad file."""
    loaded, errors = [], []
    for f in iter_log_files(paths):
        try:
            loaded.extend(Loaded(f, t) for t in load_file(f, format, domain=domain, max_bytes=max_bytes))
        except TrajectoryImportError as exc:
            errors.append(exc)
    return loaded, errors
