"""The default coding agent (bash-centred; tool-call or text actions; `create_agent` + middleware) and a scripted
model for offline runs."""

from mtl_graph.agent.base import Agent, AgentResult
from mtl_graph.agent.config import AgentConfig
from mtl_graph.agent.default import DefaultAgent
from mtl_graph.agent.formats import TOOLS
from mtl_graph.agent.loop import build_agent
from mtl_graph.agent.scripted import (
    ScriptedChatModel,
    bash_call,
    load_action_script,
    submit_call,
    text_action,
)

__all__ = [
    "TOOLS",
    "Agent",
    "AgentConfig",
    "AgentResult",
    "DefaultAgent",
    "build_agent",
    "ScriptedChatModel",
    "bash_call",
    "load_action_script",
    "submit_call",
    "text_action",
]
