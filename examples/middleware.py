"""Memory transfer as middleware of a `create_agent` agent: the memories join the end of its own system prompt.

    python examples/middleware.py        # offline: a scripted model drives the agent's real tool calls

Run it from the repository root (the task paths are relative to it). `MemoryTransferMiddleware` plans and
retrieves before the agent starts (the task's files and setup in a fresh workspace), appends the memories to the
agent's system prompt on every model call, then judges the run by the task's tests, distils it and writes the
memory back: the second task retrieves what the first one learned. `sandbox_tools()` runs each command in the
run's sandbox, never on the host.
"""

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from mtl_graph import MemoryPool, MemoryTransferMiddleware, ScriptedChatModel, Task
from mtl_graph.agent.tools import sandbox_tools

with MemoryPool.open(":memory:") as pool:
    for name in ("primes", "csv-totals"):
        task = Task.from_dir(f"examples/tasks/{name}")
        model = ScriptedChatModel.from_script(f"examples/tasks/{name}/demo_script.json")  # or "openai:gpt-5-mini"
        agent = create_agent(model, tools=sandbox_tools(), system_prompt="You are a careful coding agent.",
                             middleware=[MemoryTransferMiddleware(pool, model=model)])
        out = agent.invoke({"messages": [HumanMessage(task.instruction)], "mtl_task": task})
        print(task.id, out["mtl"]["outcome"], "retrieved:", out["mtl"]["retrieved_ids"],
              "new:", out["mtl"]["new_memory_ids"])
