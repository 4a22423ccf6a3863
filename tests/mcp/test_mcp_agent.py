"""A LangChain agent (`create_agent`) with the MCP server's tools, loaded by langchain-mcp-adapters from `mtl mcp`
over stdio, driven by the project's scripted model: it searches, reads memories fenced as data, makes one bad
call (told, not crashed) and adds what it learnt, which the pool then holds, redacted and screened."""

from __future__ import annotations

import asyncio
import sys

import pytest

pytest.importorskip("mcp")
pytest.importorskip("langchain_mcp_adapters")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_mcp_adapters.client import MultiServerMCPClient  # noqa: E402
from langchain_mcp_adapters.tools import load_mcp_tools  # noqa: E402

from helpers.mcp_server import LESSONS, seed_pool, server_args, server_env  # noqa: E402
from helpers.paths import ROOT  # noqa: E402

from mtl_graph.llm.scripted import ScriptedChatModel  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402

pytestmark = pytest.mark.timeout(240)

NEW_LESSON = {"type": "insight", "title": "Check the lock file after an upgrade",
              "description": "When dependencies were upgraded and tests break.",
              "content": "Diff the lock file against the last green build to find the dependency that moved."}


def _call(name: str, args: dict, n: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{n}", "type": "tool_call"}])


async def _run(pool) -> tuple[list, list[str]]:
    client = MultiServerMCPClient({"mtl": {"transport": "stdio", "command": sys.executable,
                                           "args": server_args(pool), "env": server_env(), "cwd": str(ROOT)}})
    async with client.session("mtl") as session:  # one server process for the whole run
        tools = await load_mcp_tools(session)
        model = ScriptedChatModel(responses=[
            _call("search_memories", {"query": "the build broke after upgrading dependencies"}, 1),
            _call("search_memories", {"query": ""}, 2),
            _call("add_memory", {"memory": NEW_LESSON, "domain": "repo-d"}, 3),
        ], final=AIMessage(content="Using Memory 1: pinned the build tools; done."))
        agent = create_agent(model, tools)
        result = await agent.ainvoke({"messages": [HumanMessage("Fix the build that broke after the upgrade.")]})
        return result["messages"], [t.name for t in tools]


def test_a_create_agent_agent_searches_and_adds_through_the_adapters(tmp_path, embeddings):
    pool = seed_pool(tmp_path / "pool", embeddings)
    messages, names = asyncio.run(_run(pool))
    assert names == ["search_memories", "get_memory", "add_memory", "feedback", "update_memory",
                     "archive_memory", "restore_memory"]
    told = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.name for m in told] == ["search_memories", "search_memories", "add_memory"]
    found, empty, added = (m.text if hasattr(m, "text") and isinstance(m.text, str) else str(m.content)
                           for m in told)
    assert "│ Pin the versions of the build tools" in found and f"id {LESSONS[1].id}" in found
    assert told[1].status == "error" and "query is empty" in empty
    assert "added memory" in added
    assert messages[-1].content.startswith("Using Memory 1")
    with MemoryPool.open(pool, embeddings) as reopened:
        [new] = [m for m in reopened if m.title == NEW_LESSON["title"]]
        assert new.status == "active" and new.domains == ["repo-d"]
