"""`mtl mcp` over stdio with the official SDK's client: the server is the command a client such as Claude Code
starts (`python -m mtl_graph.cli mcp --pool DIR`), a process of its own on a real pool with the real embeddings.
The session is printed as a transcript (`pytest -s`)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from pydantic import AnyUrl  # noqa: E402

from helpers.mcp_server import LESSONS, seed_pool, server_args, server_env  # noqa: E402
from helpers.paths import ROOT  # noqa: E402

from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402

pytestmark = pytest.mark.timeout(240)


class Transcript:
    """A client session as text: each request and the server's answer."""

    def __init__(self, session: ClientSession) -> None:
        self.session, self.lines = session, []

    async def call(self, name: str, args: dict) -> tuple[bool, str, dict | None]:
        shown = {k: (v if not isinstance(v, str) or len(v) <= 120 else v[:60] + f"... ({len(v)} characters)")
                 for k, v in args.items()}
        self.lines.append(f"→ tools/call {name} {json.dumps(shown)}")
        result = await self.session.call_tool(name, args)
        text = "\n".join(c.text for c in result.content if c.type == "text")
        self.lines.append(f"← {'ERROR ' if result.isError else ''}{text}")
        return result.isError, text, result.structuredContent

    def print(self) -> None:
        print("\n".join(self.lines))


def _params(pool: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=server_args(pool, *extra), env=server_env(),
                                 cwd=str(ROOT))


async def _session(pool: Path) -> Transcript:
    async with stdio_client(_params(pool)) as (read, write), ClientSession(read, write) as session:
        t = Transcript(session)
        init = await session.initialize()
        t.lines.append(f"← initialize: server {init.serverInfo.name}, instructions: {init.instructions}")
        listed = await session.list_tools()
        t.lines.append("← tools/list: " + ", ".join(tool.name for tool in listed.tools))
        assert [tool.name for tool in listed.tools] == ["search_memories", "get_memory", "add_memory", "feedback",
                                                         "update_memory", "archive_memory", "restore_memory"]
        search = next(tool for tool in listed.tools if tool.name == "search_memories")
        assert search.inputSchema["required"] == ["query"] and search.annotations.readOnlyHint

        error, text, found = await t.call("search_memories", {"query": "a test fails, how do I start?", "k": 2})
        assert not error and found["found"][0]["id"] == LESSONS[0].id
        assert "│ Run the one failing test with verbose output" in text and f"id {LESSONS[0].id}" in text
        error, text, _ = await t.call("feedback", {"id": LESSONS[0].id, "verdict": "helped", "run_id": "session-1"})
        assert not error and "cited in 1 (1 succeeded" in text
        error, text, added = await t.call("add_memory", {"memory": {
            "type": "insight", "title": "Read the whole traceback", "description": "When a Python command fails.",
            "content": "Read the traceback from the bottom up; the last frame in your code is where to look."},
            "domain": "repo-c"})
        assert not error and added["status"] == "added"
        error, text, edit = await t.call("update_memory", {
            "id": added["id"], "changes": {"content": "Read the traceback bottom up: the last frame of your own "
                                                      "code is where the fix goes."}, "why": "more precise"})
        assert not error and edit["old"] == added["id"]
        error, text, _ = await t.call("restore_memory", {"id": added["id"]})
        assert not error and f"{edit['new']}, which had replaced it, is archived" in text
        error, text, _ = await t.call("archive_memory", {"id": LESSONS[1].id, "why": "we build with pinned "
                                                                                    "images now"})
        assert not error
        error, text, shown = await t.call("get_memory", {"id": LESSONS[1].id})
        assert not error and shown["status"] == "archived" and shown["changes"][0]["action"] == "archived"

        for bad in ({"query": ""}, {"query": "x" * 100_000}, {"query": ["a list"]}, {"query": "q", "k": 0},
                    {"query": "q", "namespace": "someone-else"}):
            error, text, _ = await t.call("search_memories", bad)
            assert error and "\n" not in text and len(text) < 400
        error, text, _ = await t.call("feedback", {"id": "no-such-id", "verdict": "helped"})
        assert error and "no memory 'no-such-id'" in text

        resources = await session.list_resources()
        assert [str(r.uri) for r in resources.resources] == ["mtl://pool/default/top"]
        top = await session.read_resource(AnyUrl("mtl://pool/default/top"))
        t.lines.append(f"→ resources/read mtl://pool/default/top\n← {top.contents[0].text}")
        assert "Run the failing test alone first" in top.contents[0].text
        assert "Pin build tool versions" not in top.contents[0].text  # archived
        return t


def test_a_client_session_over_stdio(tmp_path, embeddings):
    pool = seed_pool(tmp_path / "pool", embeddings)
    transcript = asyncio.run(_session(pool))
    transcript.print()
    with MemoryPool.open(pool, embeddings) as reopened:  # the server's writes are in the pool it served
        assert reopened.get(LESSONS[1].id).status == "archived"
        assert [h["verdict_by"] for h in reopened.history(LESSONS[0].id)] == ["feedback"]
        assert len(reopened) == 4  # two lessons, the added one and its edit (archived)


async def _read_only(pool: Path) -> None:
    async with stdio_client(_params(pool, "--read-only")) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        assert [tool.name for tool in listed.tools] == ["search_memories", "get_memory"]
        for name, args in [("add_memory", {"memory": {"type": "insight", "title": "t", "description": "d",
                                                      "content": "c"}}),
                           ("archive_memory", {"id": LESSONS[0].id}),
                           ("feedback", {"id": LESSONS[0].id, "verdict": "hurt"})]:
            result = await session.call_tool(name, args)
            assert result.isError and result.content[0].text.endswith("is not offered: this server is read-only")
        result = await session.call_tool("search_memories", {"query": "build broke after an upgrade"})
        assert not result.isError and result.structuredContent["found"][0]["id"] == LESSONS[1].id


def test_a_read_only_server_over_stdio_lists_and_serves_no_write(tmp_path, embeddings):
    pool = seed_pool(tmp_path / "pool", embeddings)
    asyncio.run(_read_only(pool))
    with MemoryPool.open(pool, embeddings) as reopened:
        assert len(reopened) == 2 and all(m.status == "active" and not m.changes for m in reopened)
        assert reopened.history(LESSONS[0].id) == []
