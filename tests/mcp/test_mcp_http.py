"""`mtl mcp --transport http` (streamable HTTP) in a process of its own on a free port, with the SDK's client:
two sessions one after the other see each other's writes, bad input is a tool error, a client reaches only the
namespaces the server was given, and a request naming a foreign Host (DNS rebinding) is refused."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("mcp")

import httpx  # noqa: E402
from mcp import ClientSession  # noqa: E402
try:  # the SDK's current name; releases before it only have the older one
    from mcp.client.streamable_http import streamable_http_client as http_client  # noqa: E402
except ImportError:
    from mcp.client.streamable_http import streamablehttp_client as http_client  # noqa: E402

from helpers.mcp_server import LESSONS, http_server, seed_pool  # noqa: E402

from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402

pytestmark = pytest.mark.timeout(240)
LESSON = {"type": "insight", "title": "Clear the build cache", "description": "When a build fails for no reason.",
          "content": "Delete the build cache directory and rebuild before debugging anything else."}


async def _call(url: str, name: str, args: dict):
    async with http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        return await session.call_tool(name, args)


async def _sessions(url: str) -> None:
    async with http_client(url) as (read, write, _), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.serverInfo.name == "mtl"
        schema = next(t for t in (await session.list_tools()).tools if t.name == "search_memories").inputSchema
        assert schema["properties"]["namespace"]["enum"] == ["team-a", "team-b"]
        added = await session.call_tool("add_memory", {"memory": LESSON, "namespace": "team-b"})
        assert not added.isError, added.content[0].text
        for bad in ({"query": "cache", "namespace": "team-c"}, {"query": "cache", "k": True}, {"query": " "}):
            result = await session.call_tool("search_memories", bad)
            assert result.isError and "\n" not in result.content[0].text
    # a second session (a client started later) finds it in team-b, not in team-a
    result = await _call(url, "search_memories", {"query": "the build fails for no reason", "namespace": "team-b"})
    assert [f["id"] for f in result.structuredContent["found"]] == [added.structuredContent["id"]]
    result = await _call(url, "search_memories", {"query": "the build fails for no reason"})
    assert added.structuredContent["id"] not in [f["id"] for f in result.structuredContent["found"]]


def test_streamable_http_sessions_namespaces_and_errors(tmp_path, embeddings):
    pool = seed_pool(tmp_path / "pool", embeddings, namespace="team-a")
    with http_server(pool, "--namespace", "team-a", "--namespace", "team-b") as url:
        asyncio.run(_sessions(url))
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "web", "version": "1"}}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        ours = httpx.post(url, json=initialize, headers=headers, timeout=30)
        assert ours.status_code == 200
        foreign = httpx.post(url, json=initialize, headers={**headers, "Host": "attacker.example"}, timeout=30)
        assert foreign.status_code in (400, 421)
        page = httpx.post(url, json=initialize, headers={**headers, "Origin": "http://attacker.example"},
                          timeout=30)
        assert page.status_code in (400, 403)
    with MemoryPool.open(pool, embeddings, namespace="team-b") as team_b:
        assert [m.title for m in team_b] == [LESSON["title"]]
    with MemoryPool.open(pool, embeddings, namespace="team-a") as team_a:
        assert {m.id for m in team_a} == {m.id for m in LESSONS}
