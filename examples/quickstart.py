"""Quickstart: run a task through the MTL graph, then a task of another domain that retrieves what the first learned.

    python examples/quickstart.py                               # offline: a scripted model, no API key
    MTL_MODEL=openai:gpt-5-mini python examples/quickstart.py   # live, with any init_chat_model string

Run it from the repository root (the task paths are relative to it). The scripted model replays each task's
`demo_script.json`: its actions, its plan (the retrieval query) and its answers (the insight it distils, and the
judge's decision), so the whole pipeline runs with the default memory format and no model behind it.
"""

import os

from mtl_graph import MTLContext, MemoryPool, ScriptedChatModel, Task, build_mtl_graph

with MemoryPool.open(":memory:") as pool:  # or a directory (".mtl/pool"), or "http://localhost:6333"
    for name in ("primes", "csv-totals"):
        task = Task.from_dir(f"examples/tasks/{name}")
        model = os.environ.get("MTL_MODEL") or ScriptedChatModel.from_script(f"examples/tasks/{name}/demo_script.json")
        graph = build_mtl_graph(model, pool, memory_type="insight", top_k=3)
        state = graph.invoke({"task": task}, context=MTLContext(hold_one_out=True))
        print(f"{task.id}: {state['verdict']['status']} (judged by {state['verdict']['source']})")
        for hit in state["retrieved"]:
            print(f"  retrieved {hit['type']} memory from domain {hit['domains']} (cosine {hit['similarity']:.2f})")
        print(f"  wrote {len(state['new_memory_ids'])} memory; the pool now holds {pool.count()}")
