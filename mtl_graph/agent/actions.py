"""The two ways a model can act: tool calls, or one fenced block of text per reply.

Each format turns a model reply into a list of Actions and Rejections (fed back to the model), and shows the
conversation as its models read it.
"""

from __future__ import annotations

import json

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mtl_graph.agent.templates import render


class BashArgs(BaseModel):
    """Run one shell command in the task's workspace and return its exit code and output."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, description="The shell command to run.")


class SubmitArgs(BaseModel):
    """Finish the task: call this once the work is done and verified. Ends the run."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field(description="A short summary of what was done.")


TOOL_ARGS: dict[str, type[BaseModel]] = {"bash": BashArgs, "submit": SubmitArgs}
TOOLS = [
    {
        "type": "function",
        "function": {"name": name, "description": schema.__doc__, "parameters": schema.model_json_schema()},
    }
    for name, schema in TOOL_ARGS.items()
]


@dataclass
class Action:
    """A well-formed action: a command to run, or the submission."""

    tool: str
    """bash, submit, or another tool the run offers (search_memories)."""
    text: str
    """The command, or the submission summary (another tool's arguments as JSON)."""
    call_id: str | None = None


@dataclass
class Rejection:
    """A malformed reply or tool call, and the message telling the model so."""

    message: BaseMessage


def text_of(message: BaseMessage) -> str:
    """The plain text of a message whose content may be a string or a list of content blocks."""
    if isinstance(message.content, str):
        return message.content
    parts = [b if isinstance(b, str) else b.get("text", "") for b in message.content if isinstance(b, (str, dict))]
    return "".join(parts)


class ToolCallFormat:
    name = "tool_calls"

    def __init__(self, prompts_dir: Path | None = None) -> None:
        self.prompts_dir = prompts_dir

    def reasoning(self, reply: AIMessage) -> str:
        return text_of(reply).strip()

    def parse(self, reply: AIMessage, others: frozenset[str] = frozenset()) -> list[Action | Rejection]:
        """The reply's actions; a call of one of `others` (tools the run offers beside bash and submit) is taken
        as it is: that tool checks its own arguments and tells the model what is wrong."""
        items: list[Action | Rejection] = []
        for call in reply.tool_calls:
            schema = TOOL_ARGS.get(call["name"])
            if schema is None and call["name"] in others:
                items.append(Action(tool=call["name"], text=json.dumps(call["args"]), call_id=call["id"]))
                continue
            if schema is None:
                items.append(self._reject(f"unknown tool {call['name']!r}", call["id"]))
                continue
            try:
                args = schema.model_validate(call["args"])
            except ValidationError as exc:
                items.append(self._reject(_short(exc, call["name"]), call["id"]))
                continue
            text = args.command if isinstance(args, BashArgs) else args.summary
            items.append(Action(tool=call["name"], text=text, call_id=call["id"]))
        for bad in reply.invalid_tool_calls:  # arguments that were not even valid JSON
            items.append(self._reject(f"the arguments of {bad.get('name')!r} are not valid JSON", bad.get("id")))
        if not items:
            items.append(self._reject("no tool call in the reply", None))
        return items

    def conversation(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """The messages as this mode's model reads them: as they are."""
        return list(messages)

    def _reject(self, error: str, call_id: str | None) -> Rejection:
        content = render(f"{self.name}_format_error.md", self.prompts_dir, error=error)
        if call_id is None:  # nothing to answer: tell the model as the user
            return Rejection(HumanMessage(content=content))
        return Rejection(ToolMessage(content=content, tool_call_id=call_id, status="error"))


# An action block: ```bash or ```submit at the start of a line, up to the next closing fence.
ACTION_BLOCK = re.compile(r"^```(bash|submit)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


class TextFormat:
    name = "text"

    def __init__(self, prompts_dir: Path | None = None) -> None:
        self.prompts_dir = prompts_dir

    def reasoning(self, reply: AIMessage) -> str:
        return ACTION_BLOCK.sub("", text_of(reply)).strip()

    def parse(self, reply: AIMessage) -> list[Action | Rejection]:
        blocks = ACTION_BLOCK.findall(text_of(reply))
        if len(blocks) != 1:
            return [self._reject(f"found {len(blocks)} action blocks, expected exactly one")]
        kind, body = blocks[0]
        if kind == "bash" and not body.strip():
            return [self._reject("the bash block is empty")]
        return [Action(tool=kind, text=body.strip() if kind == "submit" else body.rstrip("\n"))]

    def conversation(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """The messages as a model without tool calling reads them: the loop keeps each action as a tool call and
        each observation as a tool message; the model sees its own text and the observations as user messages."""
        shown: list[BaseMessage] = []
        for m in messages:
            if isinstance(m, AIMessage) and m.tool_calls:
                m = AIMessage(content=m.content, id=m.id, usage_metadata=m.usage_metadata)
            elif isinstance(m, ToolMessage):
                m = HumanMessage(content=m.content, id=m.id)
            shown.append(m)
        return shown

    def _reject(self, error: str) -> Rejection:
        content = render(f"{self.name}_format_error.md", self.prompts_dir, error=error)
        return Rejection(HumanMessage(content=content))


FORMATS = {"tool_calls": ToolCallFormat, "text": TextFormat}


def _short(exc: ValidationError, tool: str) -> str:
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
    return f"bad arguments for {tool!r}: {problems}"
