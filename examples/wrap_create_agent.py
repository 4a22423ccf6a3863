"""Wrap an existing agent graph with memory transfer; its bash tool runs in the run's sandbox.

    python examples/wrap_create_agent.py        # offline: a scripted model drives the agent's real tool calls

`sandbox_tools()` is a `bash` tool that runs each command in the sandbox of the run's workspace (the one the
task's setup ran in), never on the host. With a real model, replace `ScriptedChatModel(...)` by e.g.
"openai:gpt-5-mini" in both places. For a `create_agent` agent you build yourself, `MemoryTransferMiddleware`
puts the memories at the end of its own system prompt (examples/middleware.py); `with_memory_transfer` wraps any
compiled graph whose state has `messages`.
"""

from langchain.agents import create_agent

from mtl_graph import MemoryPool, ScriptedChatModel, Task, bash_call, with_memory_transfer
from mtl_graph.agent.tools import sandbox_tools
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory

task = Task(id="greet", domain="python", instruction="Create greet.py printing 'hello'.",
            check="python3 greet.py | grep -qx hello")
model = ScriptedChatModel(plan="Write greet.py with one print call, run it, and check its output.",
                          responses=[bash_call("echo \"print('hello')\" > greet.py"), bash_call("python3 greet.py")])
agent = create_agent(model, tools=sandbox_tools())  # your agent: any compiled graph whose state has `messages`
with MemoryPool.open(":memory:") as pool:
    pool.add(InsightMemory(title="Run what you wrote", description="Before finishing a scripting task.",
                           content="Execute the script once and compare its output with the request.",
                           sources=[Provenance(domain="shell", source_task_id="older-task")]))
    graph = with_memory_transfer(agent, pool, model=model, distill_formats=["trajectory"])
    state = graph.invoke({"task": task})
print("verdict:", state["verdict"]["status"], "by", state["verdict"]["source"])
print("retrieved:", [(r["type"], r["domains"], round(r["similarity"], 2)) for r in state["retrieved"]])
print("steps:", [s["action"] for s in state["trajectory"]["steps"]])
print("exit codes:", [s["exit_code"] for s in state["trajectory"]["steps"]])
print("new memories:", len(state["new_memory_ids"]))
