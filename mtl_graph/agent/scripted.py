"""A scripted chat model for tests and the offline demo: replays actions, then submits instead of cycling."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

EXHAUSTED = "The scripted actions ran out."


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


class ScriptedChatModel(FakeMessagesListChatModel):
    """Returns ``responses`` in order, then ``final`` (or a submit) every time after; never cycles.

    ``bind_tools`` returns self so the script position is shared, which lets it stand in for a real model
    both in DefaultAgent and in ``langchain.agents.create_agent``.
    """

    responses: list[BaseMessage] = Field(default_factory=list)
    """The scripted replies, in order."""
    final: BaseMessage | None = None
    """Returned once the script runs out (None: a submit call if a submit tool is bound, else a ```submit block)."""
    bound_tools: list[str] = Field(default_factory=list)
    """Names of the tools last bound (recorded, not enforced)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":  # type: ignore[override]
        self.bound_tools = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        return self

    @property
    def exhausted(self) -> bool:
        return self.i >= len(self.responses)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if self.sleep is not None:
            time.sleep(self.sleep)
        if self.exhausted:
            message = self.final.model_copy(deep=True) if self.final is not None else self._default_final()
        else:
            # A copy, so ids LangChain assigns to one run's message never leak into a replay of the script.
            message = self.responses[self.i].model_copy(deep=True)
            self.i += 1
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _default_final(self) -> AIMessage:
        if "submit" in self.bound_tools:
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


def _script_problem(exc: ValidationError) -> str:
    """The first problem, naming only the script's own keys and positions: never a value or key of the file (a
    served graph may be asked to load any file, and the error goes back to its client)."""
    first = exc.errors(include_input=False, include_url=False)[0]
    known = {"actions", *_ScriptAction.model_fields}
    where = ".".join(str(p) if isinstance(p, int) or p in known else "<key>" for p in first["loc"]) or "the script"
    return (f"{where}: {first['msg']}; expected {{\"actions\": [{{\"bash\": ...}} or {{\"submit\": ...}}]}}")


def load_action_script(
    path: str | Path, action_format: Literal["tool_calls", "text"] = "tool_calls"
) -> list[AIMessage]:
    """Read ``{"actions": [{"bash": "..."}, {"submit": "...", "thought": "..."}]}`` into AI messages."""
    path = Path(path)
    try:
        script = _Script.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except UnicodeDecodeError:
        raise ValueError(f"invalid action script {path}: not UTF-8 text") from None
    except ValidationError as exc:
        raise ValueError(f"invalid action script {path}: {_script_problem(exc)}") from None
    except (OSError, json.JSONDecodeError) as exc:  # neither message quotes the file's text
        raise ValueError(f"invalid action script {path}: {exc}") from None
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
