"""The default coding agent: one shell command per turn, a submit action to finish (mini-swe-agent style).

`DefaultAgent.run` keeps the `Agent` protocol for direct callers (the eval harness, benchmarks) and runs the same
`create_agent` loop the MTL graph runs as its execute subgraph (`agent/loop.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from mtl_graph.agent.base import AgentResult
from mtl_graph.agent.config import AgentConfig
from mtl_graph.agent.loop import build_agent, opening_messages, recursion_limit, result_of
from mtl_graph.agent.tools import ON_STEP_KEY
from mtl_graph.core.trajectory import Step
from mtl_graph.sandbox.base import Sandbox
from mtl_graph.sandbox.registry import lent
from mtl_graph.core.task import Task

OnStep = Callable[[Step], "str | None"]
"""Called after every action; text it returns is shown to the model with that action's observation."""


@dataclass
class DirectRun:
    """The run context of `DefaultAgent.run`: the caller's model."""

    model: BaseChatModel


class DefaultAgent:
    """Runs a task in a sandbox that the caller has prepared (files materialized, setup run)."""

    def __init__(self, config: AgentConfig | None = None) -> None:
        self.config = config or AgentConfig()
        self._graph: Any = None

    @property
    def graph(self) -> Any:
        """The compiled agent for direct runs (built once)."""
        if self._graph is None:
            self._graph = build_agent(self.config, lambda runtime, state: runtime.context.model,
                                      context_schema=DirectRun)
        return self._graph

    def run(
        self,
        task: Task,
        sandbox: Sandbox,
        model: BaseChatModel,
        memory_block: str = "",
        on_step: OnStep | None = None,
    ) -> AgentResult:
        workspace = str(sandbox.workspace)
        start = {"messages": opening_messages(self.config, task, memory_block), "workspace": workspace}
        config: dict[str, Any] = {"recursion_limit": recursion_limit(self.config)}
        if on_step is not None:  # the one channel every host's steps go through (agent.tools.tell_step)
            config["configurable"] = {ON_STEP_KEY: lambda step, runtime: on_step(step)}
        with lent(workspace, sandbox):
            state = self.graph.invoke(start, context=DirectRun(model), config=config)
        return result_of(state, self.config)
