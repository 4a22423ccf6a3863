"""The default agent's middleware for `create_agent`: run limits, provider errors and retries, the action format,
and the hook that sees every step.

State the loop needs across super-steps (and across a resume in a new process) lives in `AgentRunState`: the
workspace path, how the run ended, the time it used, the malformed replies in a row. Everything else (steps,
tokens, the submission) is read back from the messages, so a checkpoint holds one copy of the run."""

from __future__ import annotations

import asyncio
import operator
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import AgentState, ExtendedModelResponse, ModelResponse, hook_config
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command
from typing_extensions import NotRequired

from mtl_graph.agent.config import AgentConfig
from mtl_graph.agent.actions import FORMATS, Action, Rejection
from mtl_graph.llm.retry import describe
from mtl_graph.agent.templates import render
from mtl_graph.core.trajectory import TokenUsage

Settings = Callable[[Any], AgentConfig]
"""The agent's settings for a run, from the run's runtime (per-run knobs may override the build-time config)."""
ModelOf = Callable[[Any, dict[str, Any]], BaseChatModel]
"""The chat model of a run, from the run's runtime and the agent's state."""


class AgentRunState(AgentState):
    """The agent's state beside its messages."""

    workspace: NotRequired[str | None]
    exit_status: NotRequired[str | None]
    error: NotRequired[str | None]
    elapsed: NotRequired[Annotated[float, operator.add]]
    format_streak: NotRequired[int]
    malformed: NotRequired[Annotated[int, operator.add]]


def tokens_of(messages: list[AnyMessage]) -> TokenUsage:
    """Input and output tokens of every model reply (from usage metadata)."""
    total = TokenUsage()
    for m in messages:
        meta = (m.usage_metadata or {}) if isinstance(m, AIMessage) else {}
        total += TokenUsage(input=meta.get("input_tokens", 0), output=meta.get("output_tokens", 0))
    return total


def limit_reached(cfg: AgentConfig, state: dict[str, Any]) -> str | None:
    """Why the run must stop before the next model call (the exit status), or None."""
    messages = state.get("messages", [])
    if state.get("format_streak", 0) >= cfg.max_consecutive_format_errors:
        return "format_errors"
    if sum(isinstance(m, AIMessage) for m in messages) >= cfg.step_limit:
        return "step_limit"
    if cfg.wall_time_limit is not None and state.get("elapsed", 0.0) >= cfg.wall_time_limit:
        return "time_limit"
    tokens = tokens_of(messages)
    if cfg.token_limit is not None and tokens.input + tokens.output >= cfg.token_limit:
        return "token_limit"
    return None


class RunLimits(AgentMiddleware):
    """Ends the run before a model call once a limit is reached: malformed replies in a row, model turns, wall
    time (time spent in model calls and commands, so a resumed run does not count the time it was dead), tokens.

    Not `ModelCallLimitMiddleware`: its per-run count is not checkpointed (a resumed run would start over) and it
    ends the run with a message of its own in the transcript."""

    state_schema = AgentRunState

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: AgentRunState, runtime: Any) -> dict[str, Any] | None:
        if state.get("exit_status"):  # ended by the previous super-step (e.g. a provider error)
            return {"jump_to": "end"}
        status = limit_reached(self.settings(runtime), state)
        return {"exit_status": status, "jump_to": "end"} if status else None


class ProviderErrors(AgentMiddleware):
    """The outermost model-call wrapper: any failure left after retries ends the run with exit_status
    model_error instead of escaping the graph; the call's wall time is added to the run's elapsed time."""

    state_schema = AgentRunState

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        begin = time.monotonic()
        try:
            return self._timed(handler(request), begin)
        except GraphBubbleUp:  # interrupts and the like belong to LangGraph
            raise
        except Exception as exc:  # noqa: BLE001 - a provider can fail in any way; the run records it
            return self._failed(exc, begin)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        begin = time.monotonic()
        try:
            return self._timed(await handler(request), begin)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001
            return self._failed(exc, begin)

    @staticmethod
    def _timed(result: Any, begin: float) -> ExtendedModelResponse:
        clock = {"elapsed": time.monotonic() - begin}
        if isinstance(result, ExtendedModelResponse):
            update = {**((result.command.update or {}) if result.command else {}), **clock}
            return ExtendedModelResponse(model_response=result.model_response, command=Command(update=update))
        response = result if isinstance(result, ModelResponse) else ModelResponse(result=[result])
        return ExtendedModelResponse(model_response=response, command=Command(update=clock))

    @staticmethod
    def _failed(exc: Exception, begin: float) -> ExtendedModelResponse:
        update = {"exit_status": "model_error", "error": describe(exc), "jump_to": "end",
                  "elapsed": time.monotonic() - begin}
        return ExtendedModelResponse(model_response=ModelResponse(result=[]), command=Command(update=update))


class ProviderRetry(AgentMiddleware):
    """Tries a model call that failed transiently (429, 5xx, timeout, reset) again under the run's
    `RetrySettings`: exponential backoff with jitter, a provider's `retry-after` honoured when it asks for longer."""

    wait = staticmethod(time.sleep)
    """How a retry waits (a test can record the waits instead; async runs wait with asyncio.sleep)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self.settings(request.runtime).retry.call(lambda: handler(request), self.wait)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self.settings(request.runtime).retry.acall(lambda: handler(request))


class ActionFormat(AgentMiddleware):
    """What the model is asked and how its reply becomes actions, in tool-call or text mode.

    It picks the run's model, and in text mode binds no tools and shows the model a plain conversation
    (observations as user messages). The reply is parsed by the mode's format: exactly one action runs (a text
    block becomes a tool call); malformed replies and calls are answered with the format-error template and the
    model is asked again; further actions of a reply are answered, not run (one command per step)."""

    state_schema = AgentRunState

    def __init__(self, settings: Settings, model_of: ModelOf) -> None:
        super().__init__()
        self.settings, self.model_of = settings, model_of

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        cfg = self.settings(request.runtime)
        model = self.model_of(request.runtime, request.state)
        return self._parsed(request, handler(self._request(request, cfg, model)), cfg)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        cfg = self.settings(request.runtime)
        # Resolving a "provider:model" string imports its client: off the event loop.
        model = await asyncio.to_thread(self.model_of, request.runtime, request.state)
        return self._parsed(request, await handler(self._request(request, cfg, model)), cfg)

    @staticmethod
    def _request(request: Any, cfg: AgentConfig, model: BaseChatModel) -> Any:
        overrides: dict[str, Any] = {"model": model}
        if cfg.action_format == "text":
            fmt = FORMATS[cfg.action_format](cfg.prompts_dir)
            overrides.update(tools=[], messages=fmt.conversation(request.messages))
        return request.override(**overrides)

    @staticmethod
    def _parsed(request: Any, response: Any, cfg: AgentConfig) -> Any:
        reply = next((m for m in reversed(response.result) if isinstance(m, AIMessage)), None)
        if reply is None:
            return response
        fmt = FORMATS[cfg.action_format](cfg.prompts_dir)
        offered = frozenset(n for n in map(_tool_name, request.tools or []) if n and n not in ("bash", "submit"))
        items = fmt.parse(reply, offered) if cfg.action_format == "tool_calls" else fmt.parse(reply)
        actions = [i for i in items if isinstance(i, Action)]
        answers = [i.message for i in items if isinstance(i, Rejection)]
        for extra in actions[1:]:
            content = render("one_action.md", cfg.prompts_dir, tool=extra.tool)
            answers.append(ToolMessage(content=content, tool_call_id=extra.call_id or "", status="error"))
        if actions and cfg.action_format == "text":
            reply = as_tool_call(reply, actions[0])
        rejected = len(answers) - len(actions[1:])
        streak = request.state.get("format_streak", 0) + 1 if rejected else 0
        update: dict[str, Any] = {"format_streak": streak, "malformed": rejected}
        if not actions:
            update["jump_to"] = "model"  # ask again (RunLimits ends the run when the streak is too long)
        return ExtendedModelResponse(model_response=ModelResponse(result=[reply, *answers]),
                                     command=Command(update=update))


def _tool_name(tool: Any) -> str | None:
    return tool.get("name") if isinstance(tool, dict) else getattr(tool, "name", None)


def as_tool_call(reply: AIMessage, action: Action) -> AIMessage:
    """The text reply with its one action block as a tool call, so the tools node runs it like any other."""
    args = {"command": action.text} if action.tool == "bash" else {"summary": action.text}
    call = {"name": action.tool, "args": args, "id": f"text_{uuid.uuid4().hex[:16]}", "type": "tool_call"}
    return reply.model_copy(update={"tool_calls": [call]})


class StepObserver(AgentMiddleware):
    """Adds each tool call's wall time to the run's clock (the tools record their steps and call the run's step
    hook themselves: `agent.tools.tell_step`)."""

    state_schema = AgentRunState

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        begin = time.monotonic()
        return self._timed(handler(request), time.monotonic() - begin)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        begin = time.monotonic()
        return self._timed(await handler(request), time.monotonic() - begin)

    @staticmethod
    def _timed(result: Any, elapsed: float) -> Any:
        return Command(update={"messages": [result], "elapsed": elapsed}) if isinstance(result, ToolMessage) else result


def transcript(messages: list[BaseMessage], cfg: AgentConfig) -> list[BaseMessage]:
    """The conversation as the model saw it (text mode: no tool calls, observations as user messages)."""
    return FORMATS[cfg.action_format](cfg.prompts_dir).conversation(messages)
