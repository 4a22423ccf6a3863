"""Graphs for `langgraph dev` / LangGraph Studio (registered in langgraph.json).

Importing this module needs no API key and no network: the model is resolved when a run starts (the run's
context `model`, else MTL_MODEL) and the pool (MTL_POOL) is opened on first use. Every MTL_* run setting in the
environment becomes the graph's default; Studio's context form overrides it per run. The server supplies the
checkpointer and store, so the graphs are compiled without their own. MTL_APPROVE_COMMANDS=1 pauses every run
before each command the agent runs (resume the thread to run it; see docs/studio.md).

A server's clients get nothing of the server's own (`mtl_graph/pipeline/server_policy.py`): task paths, source_dir
and scripted: files only inside MTL_TASK_ROOTS (default: this project's examples/tasks), a context's base_url or
provider only when MTL_ALLOWED_BASE_URLS / MTL_ALLOWED_PROVIDERS list it, setup network only with
MTL_ALLOW_SETUP_NETWORK=1."""

from pathlib import Path

from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.pipeline.server_policy import ServerPolicy
from mtl_graph.config.environment import get_settings

PROJECT_TASKS = Path(__file__).resolve().parent.parent / "examples" / "tasks"

_settings = get_settings()
_defaults = _settings.run_context().given()
policy = ServerPolicy.from_settings(_settings, default_roots=[PROJECT_TASKS])

graph = build_mtl_graph(_defaults.pop("model", None), None, sandbox=_settings.sandbox,
                        interrupt_before_tools=_settings.approve_commands, policy=policy, **_defaults)
