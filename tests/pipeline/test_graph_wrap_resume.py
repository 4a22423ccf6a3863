"""`with_memory_transfer` and human-in-the-loop or async callers: an interrupt inside the wrapped agent pauses the
run and `Command(resume=...)` continues it in the same workspace (also in another process, also under
`ainvoke`); without a checkpointer the run ends cleanly; async-only tools work under `ainvoke`."""

import json
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call
from mtl_graph.agent.tools import sandbox_tools
from mtl_graph.sandbox.registry import is_open
from mtl_graph.core.task import Task
from helpers.wrapping import SOLVE, call, exercism_task, wrap


@pytest.fixture
def exercise(tmp_path) -> Task:
    return exercism_task(tmp_path)


def test_an_interrupt_inside_the_wrapped_agent_reaches_the_caller_and_resume_continues(exercise, tmp_path):
    seen: list[str] = []

    @tool
    def ask_human(question: str, config: RunnableConfig) -> str:
        """Ask the person supervising the run."""
        seen.append(config["configurable"]["mtl_workspace"])
        return str(interrupt(question))

    model = ScriptedChatModel(responses=[bash_call("ls"), call("ask_human", 1, question="May I overwrite primes.py?"),
                                         bash_call(SOLVE), AIMessage("is_prime written")])
    graph = wrap(create_agent(model, tools=[ask_human, *sandbox_tools()]), None, tmp_path,
                 checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "hitl"}}

    def steps_told(chunks) -> list[str]:
        return [c["command"] for mode, c in chunks if mode == "custom" and c["kind"] == "step"]

    first = list(graph.stream({"task": exercise}, thread, stream_mode=["custom", "updates"]))
    [pending] = next(c["__interrupt__"] for mode, c in first if mode == "updates" and "__interrupt__" in c)
    assert pending.value == "May I overwrite primes.py?" and steps_told(first) == ["ls"]
    assert Path(seen[0]).is_dir() and is_open(seen[0])  # the run's workspace and sandbox wait for the answer
    second = list(graph.stream(Command(resume="yes, go ahead"), thread, stream_mode=["custom", "values"]))
    assert seen[-1] == seen[0]  # the same workspace after the resume, not a new one
    assert steps_told(second) == [SOLVE, 'ask_human({"question": "May I overwrite primes.py?"})']  # each once
    state = [c for mode, c in second if mode == "values"][-1]
    steps = state["trajectory"]["steps"]
    assert [s["tool"] for s in steps] == ["bash", "ask_human", "bash"] and steps[1]["observation"] == "yes, go ahead"
    assert state["verdict"]["status"] == "pass" and state["error"] is None and not is_open(seen[0])
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 1


def test_a_wrapped_run_under_ainvoke_runs_the_agent_natively_async_without_blocking(exercise, tmp_path):
    import asyncio

    from langchain_core.tools import StructuredTool

    async def lookup(term: str) -> str:
        """Look a name up (async only, like an MCP tool)."""
        return f"{term}: an integer greater than 1 with no divisors but 1 and itself"

    model = ScriptedChatModel(responses=[call("lookup", 1, term="prime"), bash_call(SOLVE),
                                         AIMessage("is_prime written")])
    tools = [StructuredTool.from_function(coroutine=lookup, name="lookup", description=lookup.__doc__),
             *sandbox_tools()]
    graph = wrap(create_agent(model, tools=tools), None, tmp_path)

    async def final():
        return [chunk async for chunk in graph.astream({"task": exercise}, stream_mode=["custom", "values"])]

    from blockbuster import blockbuster_ctx  # what a LangGraph server uses to refuse blocking calls

    with blockbuster_ctx():
        chunks = asyncio.run(final())
    told = [c["command"] for mode, c in chunks if mode == "custom" and c["kind"] == "step"]
    state = [c for mode, c in chunks if mode == "values"][-1]
    assert state["error"] is None and state["verdict"]["status"] == "pass"
    assert [s["tool"] for s in state["trajectory"]["steps"]] == ["lookup", "bash"]
    assert state["trajectory"]["steps"][1]["exit_code"] == 0 and state["timings"]["execute"] > 0
    assert told == [SOLVE, 'lookup({"term": "prime"})']  # the sandbox command live, the other tool after


RESUMABLE = '''
import sys
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command, interrupt
from mtl_graph.llm.scripted import ScriptedChatModel, bash_call
from mtl_graph.agent.tools import sandbox_tools
from mtl_graph.pipeline import with_memory_transfer
from mtl_graph.core.task import Task

@tool
def confirm(question: str) -> str:
    """Ask the person supervising the run."""
    return str(interrupt(question))

phase, db, log = sys.argv[1:4]
script = [AIMessage("", tool_calls=[{"name": "confirm", "args": {"question": "go?"}, "id": "c1", "type": "tool_call"}]),
          bash_call("echo $(cat seed.txt)-resumed > out.txt"), AIMessage("done")]
# a new process replays the script from where the checkpoint left the agent: the model's position is the state's
model = ScriptedChatModel(responses=script[1:] if phase == "resume" else script)
task = Task(id="two-processes", instruction="x", files={"seed.txt": "seed"}, check="grep -qx seed-resumed out.txt")
with SqliteSaver.from_conn_string(db) as saver:
    graph = with_memory_transfer(create_agent(model, tools=[confirm, *sandbox_tools()]), None, model=model,
                                 memory_type="none", online=False, run_log=log, checkpointer=saver)
    thread = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"task": task} if phase == "start" else Command(resume="yes"), thread)
    print(out["__interrupt__"][0].value if "__interrupt__" in out else out["verdict"]["status"])
'''


def test_a_run_interrupted_in_one_process_resumes_in_another_in_the_same_workspace(tmp_path):
    from helpers.fresh_process import Zygote

    script = tmp_path / "resumable.py"
    script.write_text(RESUMABLE)
    args = [str(tmp_path / "threads.sqlite"), str(tmp_path / "runs.jsonl")]
    # each phase a new process, forked from one that only imported what the script imports (fresh_process.py)
    zygote = Zygote(["pytest", "langchain.agents", "langchain_core.tools", "langgraph.checkpoint.sqlite",
                     "langgraph.types", "mtl_graph.agent.tools", "mtl_graph.pipeline"], tmp_path)

    def run(phase: str) -> str:
        done = zygote.run(script, phase, *args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    try:
        assert run("start") == "go?"
        assert run("resume") == "pass"  # the prepared workspace (seed.txt) was replayed; its sandbox opened anew
    finally:
        zygote.close()
    [line] = [json.loads(x) for x in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [s["action"] for s in line["steps"]][1] == "echo $(cat seed.txt)-resumed > out.txt"


def test_an_interrupt_without_a_checkpointer_ends_the_run_with_one_clear_error(tmp_path):
    seen: list[str] = []

    @tool
    def ask_human(question: str, config: RunnableConfig) -> str:
        """Ask the person supervising the run."""
        seen.append(config["configurable"]["mtl_workspace"])
        return str(interrupt(question))

    model = ScriptedChatModel(responses=[call("ask_human", 1, question="ok?"), AIMessage("done")])
    state = wrap(create_agent(model, tools=[ask_human]), None, tmp_path).invoke(
        {"task": Task(id="t", instruction="x", check="true")})
    assert "no checkpointer" in state["error"] and state["outcome"] == "error" and "__interrupt__" not in state
    assert not Path(seen[0]).exists() and not is_open(seen[0])  # nothing leaks for a run no one can resume
    assert "no checkpointer" in json.loads((tmp_path / "runs.jsonl").read_text())["error"]


def test_an_interrupt_under_ainvoke_pauses_and_resumes_the_same_run(exercise, tmp_path):
    import asyncio

    seen: list[str] = []

    @tool
    def ask_human(question: str, config: RunnableConfig) -> str:
        """Ask the person supervising the run."""
        seen.append(config["configurable"]["mtl_workspace"])
        return str(interrupt(question))

    model = ScriptedChatModel(responses=[call("ask_human", 1, question="go?"), bash_call(SOLVE), AIMessage("done")])
    graph = wrap(create_agent(model, tools=[ask_human, *sandbox_tools()]), None, tmp_path,
                 checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "async-hitl"}}

    async def both():
        return (await graph.ainvoke({"task": exercise}, thread),
                await graph.ainvoke(Command(resume="yes"), thread))

    paused, state = asyncio.run(both())
    assert [i.value for i in paused["__interrupt__"]] == ["go?"]
    assert state["verdict"]["status"] == "pass" and seen[0] == seen[-1] and not is_open(seen[0])
