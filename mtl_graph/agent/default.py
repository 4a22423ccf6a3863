"""The default coding agent: one shell command per turn, a submit action to finish (mini-swe-agent style)."""

from __future__ import annotations

import time
from collections.abc import Callable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from mtl_graph.agent.base import AgentResult
from mtl_graph.agent.config import AgentConfig
from mtl_graph.agent.formats import FORMATS, Action, Rejection
from mtl_graph.agent.templates import render
from mtl_graph.agent.tools import render_observation, run_command
from mtl_graph.experience.trajectory import Step, TokenUsage
from mtl_graph.sandbox.base import Sandbox
from mtl_graph.tasks import Task

OnStep = Callable[[Step], "str | None"]
"""Called after every action; text it returns is shown to the model with that action's observation."""


class DefaultAgent:
    """Runs a task in a sandbox that the caller has prepared (files materialized, setup run)."""

    def __init__(self, config: AgentConfig | None = None) -> None:
        self.config = config or AgentConfig()
        self.format = FORMATS[self.config.action_format](self.config.prompts_dir)

    def run(
        self,
        task: Task,
        sandbox: Sandbox,
        model: BaseChatModel,
        memory_block: str = "",
        on_step: OnStep | None = None,
    ) -> AgentResult:
        opening = [SystemMessage(self.system_prompt(memory_block)), HumanMessage(self.instance_prompt(task))]
        result = AgentResult(messages=opening)
        started, format_errors = time.monotonic(), 0
        try:
            model = self.format.bind(model)
        except Exception as exc:  # e.g. a model class without tool support
            return _end(result, "model_error", error=_describe(exc))
        for _ in range(self.config.step_limit):
            if status := self._limit_reached(started, result.tokens):
                return _end(result, status)
            try:
                reply = model.invoke(result.messages)
            except Exception as exc:  # provider errors must end the run, not the caller's graph
                return _end(result, "model_error", error=_describe(exc))
            result.messages.append(reply)
            result.tokens += _usage(reply)
            items = self.format.parse(reply)
            format_errors = format_errors + 1 if any(isinstance(i, Rejection) for i in items) else 0
            reasoning = self.format.reasoning(reply) or None
            for item in items:
                if isinstance(item, Rejection):
                    result.messages.append(item.message)
                    result.format_errors += 1
                    continue
                step = self._act(item, sandbox, started, reasoning)
                reasoning = None  # the thought belongs to the first action of the reply
                result.steps.append(step)
                note = on_step(step) if on_step is not None else None
                if item.tool == "submit":
                    result.messages.append(self.format.observation(item, "Submitted."))
                    return _end(result, "submitted", submission=item.text)
                observation = self._render_observation(step) + (f"\n\n{note}" if note else "")
                result.messages.append(self.format.observation(item, observation))
            if format_errors >= self.config.max_consecutive_format_errors:
                return _end(result, "format_errors")
        return _end(result, "step_limit")

    def system_prompt(self, memory_block: str = "") -> str:
        """The mode's system prompt, with the memory block (if any) appended once at the end."""
        prompt = render(f"{self.format.name}_system.md", self.config.prompts_dir)
        return f"{prompt}\n\n{memory_block.strip()}" if memory_block.strip() else prompt

    def instance_prompt(self, task: Task) -> str:
        cfg = self.config
        return render("instance.md", cfg.prompts_dir, instruction=task.instruction, step_limit=cfg.step_limit)

    def _limit_reached(self, started: float, tokens: TokenUsage) -> str | None:
        cfg = self.config
        if cfg.wall_time_limit is not None and time.monotonic() - started >= cfg.wall_time_limit:
            return "time_limit"
        if cfg.token_limit is not None and tokens.input + tokens.output >= cfg.token_limit:
            return "token_limit"
        return None

    def _act(self, action: Action, sandbox: Sandbox, started: float, reasoning: str | None) -> Step:
        """Run a bash action in the sandbox (a submit only becomes a step)."""
        if action.tool == "submit":
            return Step(reasoning=reasoning, action=action.text, tool="submit", args={"summary": action.text})
        timeout = self.config.command_timeout
        if self.config.wall_time_limit is not None:  # a command must not outlive the run's wall time
            timeout = max(1.0, min(timeout, self.config.wall_time_limit - (time.monotonic() - started)))
        return run_command(sandbox, action.text, self.config, timeout=timeout, reasoning=reasoning)

    def _render_observation(self, step: Step) -> str:
        return render_observation(step, self.config)


def _describe(exc: Exception) -> str:
    """The provider error in one line, with its HTTP status when the client exposes one (429, 503...)."""
    status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
    head = f"{type(exc).__name__} (HTTP {status})" if isinstance(status, int) else type(exc).__name__
    return f"{head}: {exc}"


def _usage(reply: BaseMessage) -> TokenUsage:
    meta = getattr(reply, "usage_metadata", None) or {}
    return TokenUsage(input=meta.get("input_tokens", 0), output=meta.get("output_tokens", 0))


def _end(result: AgentResult, status: str, submission: str | None = None, error: str | None = None) -> AgentResult:
    result.exit_status, result.submission, result.error = status, submission, error
    return result
