"""`mtl mcp`: the memory pool as an MCP server, so any agent that speaks MCP (Claude Code, Codex CLI, Cursor, a
LangChain agent through langchain-mcp-adapters) searches, adds, corrects and credits memories, with the guarantees
of retrieval inside the graph. `tools` holds what is offered (tools, resources, the checks on every argument),
`server` the official SDK's server over stdio or streamable HTTP. Needs the `mcp` extra (`pip install
'mtl_graph[mcp]'`)."""
