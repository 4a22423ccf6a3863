"""A scripted chat model for tests, the offline demo and first runs: replays actions, then submits instead of
cycling; answers the plan and structured-output requests from its script when it has answers for them.

The structured-output schemas a script answers by a friendly key (`ANSWER_ALIASES`: the distillers' drafts, the
judge's decision) belong to packages above this one, so it imports none of them: an answer is checked against the
schema a request binds, when it binds it (`bind_tools`), and, for the schemas their owners declared with
`answerable` (which they do where they define or use them), already when the script loads.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from pathlib import Path
from typing import Any, Literal, TypeVar

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

S = TypeVar("S", bound=BaseModel)

EXHAUSTED = "The scripted actions ran out."
ANSWER_ALIASES = {"insight": "InsightDraft", "workflow": "WorkflowDraft", "summary": "SummaryDraft",
                  "judge": "JudgeDecision"}
"""Friendly keys of `answers`: the memory formats a model writes, and the LLM judge, by their schema's tool name."""
_NOT_MODEL_WRITTEN = {"trajectory"}  # trajectory memories are copied from the run: no request to answer


def _call(name: str, args: dict[str, Any], thought: str) -> AIMessage:
    # Unique ids: providers reject a conversation that repeats one.
    call_id = f"call_{uuid.uuid4().hex[:16]}"
    return AIMessage(content=thought, tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


def bash_call(command: str, thought: str = "") -> AIMessage:
    """An AI message calling the bash tool with command."""
    return _call("bash", {"command": command}, thought)


def submit_call(summary: str, thought: str = "") -> AIMessage:
    """An AI message calling the submit tool with summary."""
    return _call("submit", {"summary": summary}, thought)


def text_action(kind: Literal["bash", "submit"], body: str, thought: str = "") -> AIMessage:
    """An AI message in text-action form: an optional thought, then one fenced ```bash or ```submit block."""
    block = f"```{kind}\n{body.rstrip()}\n```"
    return AIMessage(content=f"{thought}\n\n{block}" if thought else block)


_ANSWERABLE: dict[str, type[BaseModel]] = {}
"""The schemas of ANSWER_ALIASES declared so far (`answerable`), by tool name."""


def tool_name(schema: Any) -> str:
    """The name a tool or structured-output schema is bound under (a pydantic model's: its class name)."""
    return convert_to_openai_tool(schema)["function"]["name"]


def answerable(schema: type[S]) -> type[S]:
    """Declare one of ANSWER_ALIASES' schemas (a class decorator), so that a script's answer for it is checked when
    the script loads rather than first when a request binds the schema. Its owner calls this: this module is
    below the distillers and the judge and imports neither."""
    name = tool_name(schema)
    if name not in ANSWER_ALIASES.values():
        raise ValueError(f"{name} is not a schema of ANSWER_ALIASES ({', '.join(ANSWER_ALIASES.values())})")
    _ANSWERABLE[name] = schema
    return schema


def _alias_of(key: str) -> str | None:
    """The alias an answers key stands for (the alias itself, or its schema's tool name); None: another key."""
    return key if key in ANSWER_ALIASES else next((a for a, n in ANSWER_ALIASES.items() if n == key), None)


def _answer_problem(key: str, args: Any, schema: type[BaseModel] | None = None) -> str | None:
    """Why answers[key] cannot be used (None: it can, or it cannot be checked yet), naming only our own keys and
    the schema's fields.

    An answer for a schema of ANSWER_ALIASES (by alias or tool name) must be a valid instance of `schema` (the
    one a request binds; default: the one declared `answerable`, if any) with no unknown field, so a typo fails
    at load time instead of as a memory that is not written; other keys answer a caller's own schemas and are
    passed on as they are."""
    alias = _alias_of(key)
    where = f"answers.{key}" if alias else "answers.<key>"
    if key in _NOT_MODEL_WRITTEN:
        return f"answers.{key}: {key} memories are copied from the run, not written by a model; drop this answer"
    if not isinstance(args, dict):
        return f"{where}: must be an object of the tool call's arguments"
    if alias is None:
        return None
    schema = schema if schema is not None else _ANSWERABLE.get(ANSWER_ALIASES[alias])
    if schema is None:  # not declared in this process yet: checked when a request binds it
        return None
    fields = list(schema.model_fields)
    if set(args) - set(fields):
        return f"{where}: unknown field; the fields are {', '.join(fields)}"
    try:
        schema.model_validate(args)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        loc = ".".join(str(p) if isinstance(p, int) or p in fields else "<key>" for p in first["loc"])
        return f"{where}{'.' + loc if loc else ''}: {first['msg']}"
    return None


def _tool_names(tools: Any) -> list[str]:
    # Bound tools arrive in OpenAI's format; a caller may also pass them to invoke directly.
    return [t.get("function", t).get("name", "") if isinstance(t, dict) else str(t) for t in tools or []]


def _forced(tool_choice: Any) -> bool:
    return tool_choice not in (None, False, "auto", "none")


class ScriptedChatModel(FakeMessagesListChatModel):
    """Returns ``responses`` in order, then ``final`` (or a submit) every time after; never cycles.

    It answers by the request's shape. A structured-output request (one tool bound and forced, as
    ``with_structured_output`` binds its schema) is answered from ``answers`` when it holds one for that tool;
    the plan request (one human message, no tools: the MTL graph's plan node) is answered with ``plan`` when set.
    Both without consuming a scripted reply, so one script drives an agent under every memory format. Any other
    request, or one left unanswered, takes the next reply. ``bind_tools`` returns a binding of this model, so the
    script position is shared while each call sees only its own tools: it stands in for a real model both in
    DefaultAgent and in ``langchain.agents.create_agent``.
    """

    responses: list[BaseMessage] = Field(default_factory=list)
    """The scripted replies, in order."""
    final: BaseMessage | None = None
    """Returned once the script runs out (None: a submit call if a submit tool is bound, else a ```submit block)."""
    plan: str | None = None
    """The answer to every plan request (None: a plan request takes the next scripted reply)."""
    answers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Tool-call arguments answering structured-output requests, by the schema's tool name or an alias of
    ANSWER_ALIASES (insight, workflow, summary, judge); a request with no answer here takes the next reply. An
    answer for a schema of ANSWER_ALIASES must be a valid instance: checked on load for the schemas declared
    `answerable`, and when a request binds the schema for the others."""
    bound_tools: list[str] = Field(default_factory=list)
    """Names of the tools the latest call was given (recorded for tests; never used to choose a reply)."""

    @model_validator(mode="after")
    def _usable_answers(self) -> "ScriptedChatModel":
        for key, args in self.answers.items():
            if (problem := _answer_problem(key, args)) is not None:
                raise ValueError(problem)
        return self

    @classmethod
    def from_script(cls, path: str | Path, action_format: Literal["tool_calls", "text"] = "tool_calls",
                    **fields: Any) -> "ScriptedChatModel":
        """The model an action-script file describes: its actions as ``responses``, its ``plan`` and ``answers``
        (fields override or add to them, e.g. ``final``). Raises ValueError naming the file and the problem."""
        script = _read_script(path)
        return cls(**{"responses": _messages(script, action_format), "plan": script.plan,
                      "answers": script.answers, **fields})

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Runnable:  # type: ignore[override]
        tools = list(tools)
        formatted = [convert_to_openai_tool(t) for t in tools]
        if len(tools) == 1 and _forced(tool_choice) and isinstance(tools[0], type) and issubclass(tools[0], BaseModel):
            self._check_answer(formatted[0]["function"]["name"], tools[0])
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _check_answer(self, name: str, schema: type[BaseModel]) -> None:
        """A structured-output request binds `schema`: the script's answer for it must fit (ValueError otherwise)."""
        key, _ = self._answer_for(name)
        if key is not None and (problem := _answer_problem(key, self.answers[key], schema)) is not None:
            raise ValueError(problem)

    def _answer_for(self, name: str) -> tuple[str | None, dict[str, Any] | None]:
        """The key of `answers` answering the tool `name` (its own name first, then its alias), and the answer."""
        alias = _alias_of(name) if name in ANSWER_ALIASES.values() else None
        for key in (name, alias):
            if key is not None and key in self.answers:
                return key, self.answers[key]
        return None, None

    @property
    def exhausted(self) -> bool:
        return self.i >= len(self.responses)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if self.sleep is not None:
            time.sleep(self.sleep)
        tools = _tool_names(kwargs.get("tools"))
        self.bound_tools = tools
        message = self._answer(tools, kwargs.get("tool_choice"), messages) or self._next(tools)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _next(self, tools: list[str]) -> BaseMessage:
        if self.exhausted:
            return self.final.model_copy(deep=True) if self.final is not None else self._default_final(tools)
        # A copy, so ids LangChain assigns to one run's message never leak into a replay of the script.
        message = self.responses[self.i].model_copy(deep=True)
        self.i += 1
        calls = getattr(message, "tool_calls", None)
        if tools and calls and calls[0]["name"] == "submit" and "submit" not in tools:
            # An agent with no submit tool (a create_agent agent of bash alone) ends on a plain answer instead.
            return AIMessage(content=calls[0]["args"].get("summary", ""))
        return message

    def _answer(self, tools: list[str], tool_choice: Any, messages: list[BaseMessage]) -> AIMessage | None:
        """The scripted answer to a structured-output or plan request, or None (the request takes a reply)."""
        if len(tools) == 1 and _forced(tool_choice):
            name = tools[0]
            _, args = self._answer_for(name)
            return None if args is None else _call(name, copy.deepcopy(args), "")
        if not tools and self.plan is not None and len(messages) == 1 and isinstance(messages[0], HumanMessage):
            return AIMessage(content=self.plan)
        return None

    def _default_final(self, tools: list[str]) -> AIMessage:
        if "submit" in tools:
            return submit_call(EXHAUSTED)
        return text_action("submit", EXHAUSTED)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"


class _ScriptAction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    bash: str | None = None
    submit: str | None = None
    thought: str = ""

    @model_validator(mode="after")
    def _one_kind(self) -> "_ScriptAction":
        if (self.bash is None) == (self.submit is None):
            raise ValueError("each action needs exactly one of 'bash' or 'submit'")
        return self


class _Script(BaseModel):
    model_config = ConfigDict(extra="allow")  # room for notes such as the task the script solves

    actions: list[_ScriptAction] = Field(min_length=1)
    plan: str | None = Field(default=None, min_length=1)
    answers: dict[str, dict[str, Any]] = Field(default_factory=dict)


_FORMAT = ('expected {"actions": [{"bash": ...} or {"submit": ...}], "plan": "..." (optional), '
           '"answers": {"insight": {...}, ...} (optional)}')


def _script_problem(exc: ValidationError) -> str:
    """The first problem, naming only the script's own keys and positions: never a value or key of the file (a
    served graph may be asked to load any file, and the error goes back to its client)."""
    first = exc.errors(include_input=False, include_url=False)[0]
    known = {*_Script.model_fields, *_ScriptAction.model_fields, *ANSWER_ALIASES, *_NOT_MODEL_WRITTEN}
    where = ".".join(str(p) if isinstance(p, int) or p in known else "<key>" for p in first["loc"]) or "the script"
    return f"{where}: {first['msg']}; {_FORMAT}"


def _read_script(path: str | Path) -> _Script:
    path = Path(path)
    try:
        script = _Script.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except UnicodeDecodeError:
        raise ValueError(f"invalid action script {path}: not UTF-8 text") from None
    except ValidationError as exc:
        raise ValueError(f"invalid action script {path}: {_script_problem(exc)}") from None
    except (OSError, json.JSONDecodeError) as exc:  # neither message quotes the file's text
        raise ValueError(f"invalid action script {path}: {exc}") from None
    for key, args in script.answers.items():
        if (problem := _answer_problem(key, args)) is not None:
            raise ValueError(f"invalid action script {path}: {problem}")
    return script


def _messages(script: _Script, action_format: Literal["tool_calls", "text"]) -> list[AIMessage]:
    messages = []
    for a in script.actions:
        kind, body = ("bash", a.bash) if a.bash is not None else ("submit", a.submit)
        if action_format == "text":
            messages.append(text_action(kind, body or "", a.thought))
        elif kind == "bash":
            messages.append(bash_call(body or "", a.thought))
        else:
            messages.append(submit_call(body or "", a.thought))
    return messages


def load_action_script(
    path: str | Path, action_format: Literal["tool_calls", "text"] = "tool_calls"
) -> list[AIMessage]:
    """Read ``{"actions": [{"bash": "..."}, {"submit": "...", "thought": "..."}]}`` into AI messages (the file's
    ``plan`` and ``answers`` are checked but not returned: `ScriptedChatModel.from_script` uses them)."""
    return _messages(_read_script(path), action_format)
