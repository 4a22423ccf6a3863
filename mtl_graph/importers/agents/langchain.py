"""LangChain / LangGraph message dumps: ``messages_to_dict`` lists, ``{"messages": [...]}`` state dumps (also under
``values`` / ``channel_values``), ``lc``-serialised objects, ``model_dump()`` dicts and OpenAI-style role dicts."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Iterable

from mtl_graph.importers.common import (TrajectoryImportError, count, exit_code_of, given_verdict,
                                                   one_line, render_call, stem, text_of)
from mtl_graph.importers.registry import Importer, register
from mtl_graph.importers.task_text import task_text
from mtl_graph.core.trajectory import Step, TokenUsage, Trajectory
from mtl_graph.core.task import TaskRef

LANGCHAIN = "langchain"


def message_list(obj: Any) -> list[Any] | None:
    """The messages of a LangChain/LangGraph dump: a bare list, {"messages"}, {"values" / "channel_values": {...}},
    or a thread's state history (a list of states, newest first, as ``threads.get_history`` returns it)."""
    if isinstance(obj, list) and obj and all(isinstance(s, dict) and isinstance(s.get("values"), dict) for s in obj):
        obj = obj[0]
    if isinstance(obj, list):
        return obj
    if isinstance(obj, dict):
        for holder in (obj, obj.get("values"), obj.get("channel_values")):
            if isinstance(holder, dict) and isinstance(holder.get("messages"), list):
                return holder["messages"]
    return None


def looks_like_messages(msgs: list[Any]) -> bool:
    """Every item is a message dict in one of the shapes LangChain reads."""
    return bool(msgs) and all(isinstance(m, dict) and ({"type", "role", "lc"} & m.keys()) for m in msgs)


def _openai_assistant(item: dict[str, Any]) -> Any:
    """An OpenAI-style assistant dict as an AIMessage; calls whose argument JSON is malformed become invalid calls
    (langchain's own converter raises on them, losing the whole run)."""
    from langchain_core.messages import AIMessage
    from langchain_core.messages.tool import default_tool_parser

    calls, invalid = default_tool_parser([c for c in item["tool_calls"] if isinstance(c, dict)])
    return AIMessage(content=item.get("content") or "", tool_calls=calls, invalid_tool_calls=invalid,
                     id=item.get("id"))


def to_messages(items: list[Any], path: Path) -> list[Any]:
    """Message objects from any of the dict shapes; a bad item is named with a one-line reason."""
    from langchain_core.load import load
    from langchain_core.messages import BaseMessage, convert_to_messages, messages_from_dict

    out = []
    for i, item in enumerate(items):
        try:
            if isinstance(item, BaseMessage):
                out.append(item)
            elif isinstance(item, dict) and "lc" in item:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # `load` is flagged beta; messages-only loading is stable
                    out.append(load(item, allowed_objects="messages"))  # untrusted input: messages only
            elif isinstance(item, dict) and "data" in item and "type" in item:
                out.extend(messages_from_dict([item]))
            elif isinstance(item, dict) and item.get("role") == "assistant" and isinstance(item.get("tool_calls"), list) \
                    and any(isinstance(c, dict) and "function" in c for c in item["tool_calls"]):
                out.append(_openai_assistant(item))
            else:
                out.extend(convert_to_messages([item]))
        except Exception as exc:  # langchain raises ValueError/KeyError/NotImplementedError/ValidationError alike
            raise TrajectoryImportError(path, f"message {i} is not a chat message ({one_line(exc)})") from None
    return out


def trajectory_from_messages(messages: Iterable[Any], task: TaskRef | None = None, *,
                             path: str | Path = "<messages>") -> Trajectory:
    """A run from LangChain messages (objects or dict dumps), e.g. a LangGraph thread's ``messages``.

    AI tool calls with their ToolMessages become steps (calls with malformed arguments too: a failed step is
    kept); the AI text before a call is its reasoning; the last AI text without calls is the submission.
    Without a task, the first human message is the instruction.
    """
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    msgs = to_messages(list(messages), Path(path))
    if task is None:
        human = next((m for m in msgs if isinstance(m, HumanMessage)), None)
        if human is None:
            raise TrajectoryImportError(path, "no human message with the task")
        task = TaskRef(id=stem(Path(path)), instruction=task_text(text_of(human.content)))
    results = {m.tool_call_id: m for m in msgs if isinstance(m, ToolMessage)}
    steps, tokens, model, submission = [], TokenUsage(), None, None
    for n, msg in enumerate(msgs):
        if not isinstance(msg, AIMessage):
            continue
        # dict dumps lose usage_metadata into additional_kwargs when converted back
        usage = msg.usage_metadata or msg.additional_kwargs.get("usage_metadata") or {}
        try:
            tokens += TokenUsage(input=count(usage.get("input_tokens"), f"message {n} input_tokens"),
                                 output=count(usage.get("output_tokens"), f"message {n} output_tokens"))
        except ValueError as exc:
            raise TrajectoryImportError(path, str(exc)) from None
        model = msg.response_metadata.get("model_name") or msg.response_metadata.get("model") or model
        thought = text_of(msg.content).strip() or None
        calls = [(c["name"], c["args"], c.get("id"), render_call(c["name"], c["args"])) for c in msg.tool_calls]
        calls += [(c.get("name") or "?", {}, c.get("id"), f"{c.get('name') or '?'}({c.get('args') or ''})")
                  for c in msg.invalid_tool_calls]
        for name, args, call_id, action in calls:
            result = results.get(call_id or "")
            obs = text_of(result.content) if result is not None else ""
            steps.append(Step(reasoning=thought, action=action, tool=name, args=args, observation=obs,
                              exit_code=exit_code_of(obs)))
            thought = None
        if not calls and thought:
            submission = thought
    return Trajectory(task=task, steps=steps, submission=submission, model=model, tokens=tokens,
                      source_format=LANGCHAIN)


def parse_langchain(data: Any, path: Path) -> list[Trajectory]:
    """The one run of a message dump; the task id and domain come from the dump's metadata when it has them."""
    from langchain_core.messages import HumanMessage

    items = message_list(data)
    if items is None:
        raise TrajectoryImportError(path, f"not a {LANGCHAIN} log")
    messages = to_messages(items, path)
    human = next((m for m in messages if isinstance(m, HumanMessage)), None)
    if human is None:
        raise TrajectoryImportError(path, "no human message with the task")
    meta = data.get("metadata") if isinstance(data, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    task_id = (data.get("task_id") if isinstance(data, dict) else None) or meta.get("task_id") or stem(path)
    task = TaskRef(id=str(task_id), domain=str(meta.get("domain") or "default"),
                   instruction=task_text(text_of(human.content)),
                   metadata={k: v for k, v in meta.items() if k not in ("task_id", "domain")})
    run = trajectory_from_messages(messages, task, path=path)
    run.verdict = given_verdict(data if isinstance(data, dict) else None, meta)
    return [run]


@register
class LangChainImporter(Importer):
    """LangChain / LangGraph message dumps; asked last: any list of role dicts is one."""

    name = LANGCHAIN
    summary = "LangChain / LangGraph message dumps"
    order = 90

    def sniff(self, data: Any) -> bool:
        msgs = message_list(data)
        return msgs is not None and looks_like_messages(msgs)

    def parse(self, data: Any, path: Path) -> list[Trajectory]:
        return parse_langchain(data, path)
