"""Graphs for the Studio tests: the MTL graph with a scripted model replaying the slugify example.

The replay is the model's, consumed across the server's runs: each test of a shared server replays through its
own graph (`graph`, `review_graph`, `stream_graph`, `context_graph`), so none finds another's replay used up."""

from pathlib import Path

from mtl_graph.llm.scripted import ScriptedChatModel, load_action_script
from mtl_graph.pipeline import build_mtl_graph

SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "tasks" / "slugify" / "demo_script.json"


def replaying():
    return build_mtl_graph(ScriptedChatModel(responses=load_action_script(SCRIPT)), None,
                           memory_type="trajectory", distill_formats=["trajectory"])


graph, review_graph, stream_graph, context_graph = replaying(), replaying(), replaying(), replaying()
