"""Public factory `build_mtl_graph`: our coding agent in the execute stage every agent runs in (`pipeline/execute.py`);
`pipeline/wrap.py` puts anyone's compiled agent there."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from mtl_graph.agent.config import AgentConfig
from mtl_graph.agent.default import DefaultAgent
from mtl_graph.agent.loop import build_agent, opening_messages, recursion_limit, result_of
from mtl_graph.core.task import Task
from mtl_graph.config import MTLConfig, MTLContext, make_config
from mtl_graph.pipeline.execute import agent_ended, execute_stage, single_node
from mtl_graph.pipeline.memory_tool import SearchGate, memory_tools, uses_tool
from mtl_graph.pipeline.stages import PIPELINE, make_nodes, wire
from mtl_graph.pipeline.server_policy import ServerPolicy
from mtl_graph.memory.pool.pool import MemoryPool

__all__ = ["PIPELINE", "DefaultAgentHost", "build_mtl_graph"]


class RunModels:
    """The chat model of each run in progress, resolved once (a "provider:model" string is not a new client per
    call, a scripted model is not replayed from the start at each call); made again after a resume elsewhere."""

    def __init__(self, nodes: Any, keep: int = 64) -> None:
        self.nodes, self.keep = nodes, keep
        self.by_workspace: OrderedDict[str, Any] = OrderedDict()
        self.lock = threading.Lock()  # the eval harness runs several tasks through one graph at once

    def __call__(self, runtime: Any, state: dict[str, Any]) -> Any:
        key = str(state.get("workspace"))
        with self.lock:
            if key in self.by_workspace:
                return self.by_workspace[key]
        model = self.nodes.model_for(runtime)
        with self.lock:
            model = self.by_workspace.setdefault(key, model)
            while len(self.by_workspace) > self.keep:  # runs paused and never resumed
                self.by_workspace.popitem(last=False)
        return model

    def done(self, workspace: str | None) -> Any:
        with self.lock:
            return self.by_workspace.pop(str(workspace), None)


class DefaultAgentHost:
    """Our agent in the execute stage: the `create_agent` loop as its `agent` node (one super-step per model call
    and per command), the memories at the end of its system prompt, its run read back from its state."""

    needs_model = True
    memories_in_config = False

    def __init__(self, nodes: Any, config: AgentConfig, interrupt_before_tools: bool = False) -> None:
        self.nodes, self.config, self.interrupt = nodes, config, interrupt_before_tools
        self.models = RunModels(nodes)

    def settings(self, runtime: Any) -> AgentConfig:
        """The run's agent settings (resolved once per run: every model call and command of it asks)."""
        return self.nodes.agent_settings(runtime)

    def agent(self) -> Any:
        offered = SearchGate(lambda runtime: uses_tool(self.nodes.settings(runtime)))
        return build_agent(self.config, self.models, settings=self.settings,
                           sandbox_kind=self.nodes.config.sandbox.kind,
                           context_schema=MTLContext, interrupt_before_tools=self.interrupt,
                           extra_tools=memory_tools(), extra_middleware=[offered])

    def opening(self, task: Task, workspace: str, block: str, runtime: Any) -> list[BaseMessage]:
        return opening_messages(self.settings(runtime), task, block)

    def ended(self, state: dict[str, Any], task: Task, runtime: Any) -> dict[str, Any]:
        model = self.models.done(state.get("workspace")) or self.nodes.model_for(runtime)
        return agent_ended(result_of(state, self.settings(runtime)), task.ref(), model)

    def step_limit(self, runtime: Any) -> int:
        return recursion_limit(self.settings(runtime))


def build_mtl_graph(
    model: BaseChatModel | str | None,
    pool: MemoryPool | None,
    *,
    agent: Any = None,
    judge: Any = None,
    distiller: Any = None,
    config: MTLConfig | None = None,
    checkpointer: Any = None,
    store: Any = None,
    interrupt_before_tools: bool = False,
    policy: ServerPolicy | None = None,
    **settings: Any,
) -> Any:
    """The MTL graph around our bash-centred coding agent: plan -> retrieve -> execute -> judge -> distill -> write back.

    `model` and `pool` may be None: the model is then taken from the run's context (`model="provider:name"`)
    and the pool from MTL_POOL, when a run starts. Our agent (`DefaultAgent`) runs in the execute stage every agent
    runs in (the one `with_memory_transfer` puts anyone's graph in), one super-step per model call and per command; `interrupt_before_tools` pauses the run before every command (resume
    with `invoke(None, config)` on the same thread; needs a checkpointer). Another agent (anything with
    `Agent.run`) runs in a single execute node. Returns a compiled LangGraph graph.

    Settings are `config` (an `MTLConfig`) with any of its fields given as keywords over it, e.g.
    `build_mtl_graph(model, pool, memory_type="insight", top_k=3)`; each is documented on `MTLConfig`."""
    agent = DefaultAgent() if agent is None else agent
    if interrupt_before_tools and not isinstance(agent, DefaultAgent):
        raise ValueError("interrupt_before_tools needs the default agent: another agent's commands run in one node")
    cfg = make_config(config, **settings)
    nodes = make_nodes(pool, model, agent, judge, distiller, cfg, policy)
    execute = (execute_stage(nodes, DefaultAgentHost(nodes, agent.config, interrupt_before_tools))
               if isinstance(agent, DefaultAgent) else single_node(nodes, agent))
    return wire(nodes, execute, checkpointer, store, "mtl_graph")
