"""A graph for the Studio test: the MTL graph whose distiller has a bug (an unexpected exception)."""

from pathlib import Path

from mtl_graph.llm.scripted import ScriptedChatModel, load_action_script
from mtl_graph.pipeline import build_mtl_graph

SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "tasks" / "slugify" / "demo_script.json"


def broken_distiller(trajectory, formats, model):
    raise RuntimeError("distiller bug")


graph = build_mtl_graph(ScriptedChatModel(responses=load_action_script(SCRIPT)), None, memory_type="none",
                        distiller=broken_distiller)
