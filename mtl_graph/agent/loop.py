"""The agent loop: `create_agent` with a `bash` and a `submit` tool and our middleware.

`build_agent` is the one loop: `DefaultAgent.run` invokes it on a caller's sandbox, and the MTL graph's execute
subgraph runs it as a node, so every model call and every command is a LangGraph super-step. `result_of` reads a
finished run back out of the agent's state."""

from __future__ import annotations

from typing import Any, Sequence

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatResult

from mtl_graph.agent.base import AgentResult
from mtl_graph.agent.config import AgentConfig
from mtl_graph.agent.middleware import (ActionFormat, ModelOf, ProviderErrors, ProviderRetry, RunLimits, Settings,
                                        StepObserver, tokens_of, transcript)
from mtl_graph.agent.templates import render
from mtl_graph.agent.tools import sandbox_tools, submit_tool
from mtl_graph.core.trajectory import Step
from mtl_graph.core.task import Task

TOOLS_NODE = "tools"
"""The agent's node that runs commands (interrupt before it to approve each one)."""


class _RunModel(BaseChatModel):
    """Stands in for the model at build time; `ActionFormat` puts the run's model in every request."""

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise RuntimeError("the agent was called without a model for this run")

    @property
    def _llm_type(self) -> str:
        return "run-model"


def build_agent(config: AgentConfig, model_of: ModelOf, *, settings: Settings | None = None,
                sandbox_kind: str = "auto", context_schema: Any = None,
                interrupt_before_tools: bool = False, state_schema: Any = None, name: str = "agent",
                extra_tools: Sequence[Any] = (), extra_middleware: Sequence[Any] = ()) -> Any:
    """The compiled agent graph. Its input is `{"messages": opening_messages(...), "workspace": path}`; commands run
    in the workspace's sandbox (`sandbox.registry`: the caller's, or one made from the path on first use), and each
    step goes to the run's hook, `configurable["__mtl_on_step"]` (see `agent.tools.tell_step`).
    `extra_tools` (the MTL graph's search_memories) are offered beside bash and submit; `extra_middleware` wraps
    the action format (a gate that hides a tool from runs that do not offer it, so a call of it is refused)."""
    settings = settings or (lambda runtime: config)
    middleware = [ProviderErrors(), *extra_middleware, ActionFormat(settings, model_of), ProviderRetry(settings),
                  RunLimits(settings), StepObserver()]
    tools = [*sandbox_tools(kind=sandbox_kind, config=config, settings=settings), submit_tool(settings), *extra_tools]
    return create_agent(_RunModel(), tools, middleware=middleware, context_schema=context_schema, name=name,
                        state_schema=state_schema, interrupt_before=[TOOLS_NODE] if interrupt_before_tools else None)


def recursion_limit(config: AgentConfig) -> int:
    """Super-steps a run may take: a limits check, a model call and a command per turn, and some slack."""
    return 4 * config.step_limit + 20


def system_prompt(config: AgentConfig, memory_block: str = "") -> str:
    """The mode's system prompt, with the memory block (if any) appended once at the end."""
    prompt = render(f"{config.action_format}_system.md", config.prompts_dir)
    return f"{prompt}\n\n{memory_block.strip()}" if memory_block.strip() else prompt


def instance_prompt(config: AgentConfig, task: Task) -> str:
    return render("instance.md", config.prompts_dir, instruction=task.instruction, step_limit=config.step_limit)


def opening_messages(config: AgentConfig, task: Task, memory_block: str = "") -> list[BaseMessage]:
    return [SystemMessage(system_prompt(config, memory_block)), HumanMessage(instance_prompt(config, task))]


def steps_of(messages: list[BaseMessage]) -> list[Step]:
    """The run's steps: the artifacts of its tool messages (each with the thought of the reply that made it)."""
    return [Step.model_validate(m.artifact) for m in messages
            if isinstance(m, ToolMessage) and isinstance(m.artifact, dict)]


def result_of(state: dict[str, Any], config: AgentConfig) -> AgentResult:
    """The run as an AgentResult (steps, submission, exit status, tokens, the conversation as the model saw it)."""
    messages = list(state.get("messages", []))
    steps = steps_of(messages)
    submitted = bool(steps) and steps[-1].tool == "submit"
    status = state.get("exit_status") or ("submitted" if submitted else "incomplete")
    return AgentResult(steps=steps, submission=steps[-1].action if status == "submitted" else None,
                       exit_status=status, messages=transcript(messages, config), tokens=tokens_of(messages),
                       error=state.get("error") if status == "model_error" else None,
                       format_errors=state.get("malformed", 0))
