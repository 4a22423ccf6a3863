"""Scripted chat models: deterministic stand-ins for an LLM in tests and offline demos.

`RoutedChatModel` (unlike `mtl_graph.agent.ScriptedChatModel`, which replays agent actions) supports tool calling (so structured output goes through tool calls);
`RoutedTextModel` does not (structured output falls back to JSON text). Replies are taken from a script in
order, or chosen by a route function from the requested tool name and the messages (thread-safe, so
concurrent callers work). A reply may be a str (text), a dict (the tool-call arguments, or JSON text for the
text model), an AIMessage (as is) or an exception (raised).
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field

Route = Callable[[str | None, list[BaseMessage]], Any]


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.position = 0
        self.calls: list[list[BaseMessage]] = []


class RoutedTextModel(BaseChatModel):
    """A chat model without tool calling that replies from a script or a route."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    """Replies in order; the last one repeats when the script runs out."""
    route: Route | None = None
    """Chooses a reply from (tool name, messages) instead of the script."""
    tool_name: str | None = None
    """The tool bound by with_structured_output (set on bound copies)."""
    model_name: str = "scripted"
    """Reported as the model's name in provenance."""
    state: _State = Field(default_factory=_State, exclude=True)
    """Shared by bound copies: position in the script and every call's messages."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """The messages of every call so far."""
        return self.state.calls

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        with self.state.lock:
            self.state.calls.append(list(messages))
            n = self.state.position
            self.state.position += 1
            if self.route is not None:
                reply = self.route(self.tool_name, list(messages))
            elif self.script:
                reply = self.script[min(n, len(self.script) - 1)]
            else:
                raise RuntimeError("scripted model has no replies")
        if isinstance(reply, BaseException):
            raise reply
        return ChatResult(generations=[ChatGeneration(message=self._message(reply, n))])

    def _message(self, reply: Any, n: int) -> AIMessage:
        if isinstance(reply, AIMessage):
            return reply
        if isinstance(reply, dict):
            if self.tool_name is not None:
                return AIMessage(content="", tool_calls=[{"name": self.tool_name, "args": reply, "id": f"call_{n}"}])
            return AIMessage(content=json.dumps(reply))
        return AIMessage(content=str(reply))


class RoutedChatModel(RoutedTextModel):
    """A scripted chat model with tool calling."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> "RoutedChatModel":
        tool = tools[0] if tools else None
        if isinstance(tool, dict):
            name = tool.get("function", tool).get("name") or tool.get("title")
        else:
            name = getattr(tool, "__name__", None) or getattr(tool, "name", None)
        return self.model_copy(update={"tool_name": name})
