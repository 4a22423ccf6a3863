"""A graph for the Studio test: the MTL graph with a scripted model replaying the slugify example."""

from pathlib import Path

from mtl_graph.agent import ScriptedChatModel, load_action_script
from mtl_graph.graph import build_mtl_graph

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "slugify" / "demo_script.json"

graph = build_mtl_graph(ScriptedChatModel(responses=load_action_script(SCRIPT)), None,
                        memory_type="trajectory", distill_formats=["trajectory"])
