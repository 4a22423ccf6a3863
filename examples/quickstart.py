"""Quickstart: run a task through the MTL graph, then run a second task that retrieves what the first one learned.

    python examples/quickstart.py                       # offline: a scripted model replays stored actions
    MTL_MODEL=openai:gpt-5-mini python examples/quickstart.py   # live, with any init_chat_model string
"""

import os
from pathlib import Path

from mtl_graph.agent import ScriptedChatModel, load_action_script
from mtl_graph.graph import MTLContext, build_mtl_graph
from mtl_graph.memory.pool import MemoryPool
from mtl_graph.core.task import Task

TASKS = Path(__file__).resolve().parent / "tasks"


def model_for(task_dir: Path):
    """A live model when MTL_MODEL is set, else a scripted one replaying the task's demo script."""
    return os.environ.get("MTL_MODEL") or ScriptedChatModel(responses=load_action_script(task_dir / "demo_script.json"))


def main() -> None:
    live = bool(os.environ.get("MTL_MODEL"))
    memory_type = "insight" if live else "trajectory"  # trajectories need no model call to distil
    with MemoryPool.open(":memory:") as pool:  # or a directory, or http://localhost:6333
        for name in ("slugify", "primes"):
            task = Task.from_dir(TASKS / name)
            graph = build_mtl_graph(model_for(TASKS / name), pool, memory_type=memory_type,
                                    distill_formats=[memory_type])
            state = graph.invoke({"task": task}, context=MTLContext(hold_one_out=True))
            print(f"{task.id}: {state['verdict']['status']} (judged by {state['verdict']['source']})")
            for hit in state["retrieved"]:
                print(f"  retrieved {hit['type']} memory from domain {hit['domains']} (cosine {hit['similarity']:.2f})")
            print(f"  wrote {len(state['new_memory_ids'])} memory; the pool now holds {pool.count()}")


if __name__ == "__main__":
    main()
