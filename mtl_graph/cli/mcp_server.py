"""`mtl mcp`: serve the pool to MCP clients (stdio or streamable HTTP). Typer only at import time: the pool, the
embeddings and the SDK load when the command runs."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mtl_graph.cli.common import PoolOption, fail, open_pool, settings

TRANSPORTS = ("stdio", "http")


def mcp_command(
    pool: PoolOption = None,
    transport: Annotated[str, typer.Option("--transport", help="stdio (the client starts the server) or http "
                                                               "(streamable HTTP at http://HOST:PORT/mcp).")] = "stdio",
    host: Annotated[str, typer.Option("--host", help="Address the HTTP server listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port of the HTTP server.")] = 8765,
    read_only: Annotated[bool, typer.Option("--read-only", help="Offer only the tools that read (search_memories, "
                                                                 "get_memory) and the resources.")] = False,
    namespace: Annotated[Optional[list[str]], typer.Option(
        "--namespace", help="A namespace clients may name (repeatable; the first is the default). "
                            "\\[default: MTL_NAMESPACE, else default]")] = None,
) -> None:
    """Serve the memory pool over MCP: search_memories, get_memory, add_memory, feedback, update_memory,
    archive_memory, restore_memory, and a top-memories resource per namespace."""
    if transport not in TRANSPORTS:
        fail(f"--transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
    try:
        from mtl_graph.mcp.server import serve_http, serve_stdio
        from mtl_graph.mcp.tools import MemoryTools
    except ImportError as exc:  # the SDK is an optional extra
        fail(f"mtl mcp needs the MCP SDK ({exc.name} is not installed): pip install 'mtl_graph[mcp]'")
    from mtl_graph.config.names import effective
    from mtl_graph.config.schema import MTLConfig
    from mtl_graph.memory.engine.namespace import NamespaceError, check_namespace

    env = settings()
    try:
        served = tuple(check_namespace(n) for n in (namespace or [env.namespace or "default"]))
    except NamespaceError as exc:
        fail(str(exc))
    cfg = effective(MTLConfig(), env.run_context())
    with open_pool(pool, served[0]) as opened:
        tools = MemoryTools(opened, cfg, served, read_only=read_only)
        if transport == "stdio":
            serve_stdio(tools)
        else:
            typer.echo(f"mtl mcp: serving {opened.location} on http://{host}:{port}/mcp "
                       f"(namespaces: {', '.join(served)}{'; read-only' if read_only else ''})", err=True)
            serve_http(tools, host, port)
