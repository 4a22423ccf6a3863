"""PoolStore as LangGraph's store: a StateGraph node and a create_agent tool read it through the runtime, and
the langgraph.json factory (graphs/store.py) loads the way the server loads it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from helpers.memory_fixtures import seeded
from typing_extensions import TypedDict

from mtl_graph.memory.store.pool_store import PoolStore
from helpers.paths import ROOT


class State(TypedDict, total=False):
    user: str
    message: str
    recalled: list[str]
    advice: list[str]


def remember(state: State, runtime: Runtime) -> State:
    namespace = ("memories", state["user"])
    recalled = [h.value["text"] for h in runtime.store.search(namespace, query=state["message"], limit=2)]
    runtime.store.put(namespace, str(len(runtime.store.search(namespace, limit=100))), {"text": state["message"]})
    advice = [h.value["title"] for h in runtime.store.search(("mtl", "insight"), query=state["message"], limit=1)]
    return {"recalled": recalled, "advice": advice}


def test_a_state_graph_node_reads_and_writes_runtime_store(pool, tmp_path):
    insight = seeded(pool)
    builder = StateGraph(State)
    builder.add_node(remember)
    builder.add_edge(START, "remember")
    with PoolStore.open(tmp_path / "store", pool=pool, index={"fields": ["text"]}) as store:
        graph = builder.compile(store=store)
        first = graph.invoke({"user": "ann", "message": "my tests keep failing after the last edit"})
        assert first["recalled"] == [] and first["advice"] == [insight.title]
        graph.invoke({"user": "ann", "message": "I prefer tabs over spaces"})
        graph.invoke({"user": "bob", "message": "bob likes unit tests"})
        third = graph.invoke({"user": "ann", "message": "did the unit tests fail again?"})
        assert third["recalled"][0] == "my tests keep failing after the last edit"
        assert "bob likes unit tests" not in third["recalled"]  # another user's namespace
        assert store.list_namespaces(prefix=("memories",)) == [("memories", "ann"), ("memories", "bob")]


class ToolCallingFake(FakeMessagesListChatModel):
    def bind_tools(self, tools, **kwargs):  # the fake answers from its script; tools need no binding
        return self


@tool
def save_note(text: str, runtime: ToolRuntime) -> str:
    """Save a note for later conversations."""
    runtime.store.put(("notes",), "n1", {"text": text})
    return "saved"


@tool
def recall(query: str, runtime: ToolRuntime) -> str:
    """Find saved notes and pool memories about a topic."""
    hits = runtime.store.search((), query=query, limit=3)
    return " | ".join(f"{h.namespace[0]}:{h.value.get('text') or h.value.get('title')}" for h in hits)


def _call(name: str, args: dict, n: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c{n}", "type": "tool_call"}])


def test_create_agent_tools_use_the_store(pool, tmp_path):
    insight = seeded(pool)
    model = ToolCallingFake(responses=[_call("save_note", {"text": "deploys happen on fridays"}, 1),
                                       _call("recall", {"query": "when do deploys happen"}, 2),
                                       AIMessage(content="done")])
    with PoolStore.open(tmp_path / "store", pool=pool, index={"fields": ["text", "title"]}) as store:
        agent = create_agent(model, tools=[save_note, recall], store=store)
        out = agent.invoke({"messages": [HumanMessage("remember and recall")]})
        recalled = [m.content for m in out["messages"] if m.type == "tool"][1]
        assert recalled.startswith("notes:deploys happen on fridays") and f"mtl:{insight.title}" in recalled
        assert store.get(("notes",), "n1").value == {"text": "deploys happen on fridays"}


SERVED_GRAPH = """
from typing_extensions import TypedDict
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime


class State(TypedDict, total=False):
    message: str
    recalled: list[str]
    store: str


def remember(state: State, runtime: Runtime) -> State:
    notes = runtime.store.search(("notes",), limit=100)
    runtime.store.put(("notes",), str(len(notes)), {"text": state["message"]})
    hits = runtime.store.search(("notes",), query=state["message"], limit=3)
    return {"recalled": [h.value["text"] for h in hits], "store": type(runtime.store).__name__}


builder = StateGraph(State)
builder.add_node(remember)
builder.add_edge(START, "remember")
graph = builder.compile()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_langgraph_dev_serves_the_store_from_langgraph_json(tmp_path):
    """`"store": {"path": "./graphs/store.py:store"}`: runs get it as runtime.store, the SDK's store API too,
    and once the server stops its directory opens again with the items kept."""
    cli = Path(sys.executable).with_name("langgraph")
    if not cli.exists():
        pytest.skip("langgraph-cli[inmem] is not installed (pip install -e '.[test]')")
    (tmp_path / "graph.py").write_text(SERVED_GRAPH)
    (tmp_path / "langgraph.json").write_text(json.dumps({
        "dependencies": [str(ROOT)], "graphs": {"notes": "./graph.py:graph"},
        "store": {"path": f"{ROOT}/graphs/store.py:store"}}))
    port = _free_port()
    env = {**os.environ, "MTL_POOL": str(tmp_path / "pool"), "LANGSMITH_TRACING": "false",
           "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    with open(tmp_path / "server.log", "w") as log:
        proc = subprocess.Popen([str(cli), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port",
                                 str(port), "--config", "langgraph.json"], cwd=tmp_path, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                client.assistants.search()
                break
            except Exception:
                assert time.monotonic() < deadline, "langgraph dev did not start in 60 s"
                time.sleep(0.3)
        first = client.runs.wait(None, "notes", input={"message": "ann drinks green tea"})
        second = client.runs.wait(None, "notes", input={"message": "bob writes rust"})
        assert first == {"message": "ann drinks green tea", "recalled": ["ann drinks green tea"], "store": "PoolStore"}
        assert second["recalled"] == ["bob writes rust", "ann drinks green tea"]
        items = client.store.search_items(["notes"], query="what does ann drink")["items"]
        assert items[0]["value"] == {"text": "ann drinks green tea"} and items[0]["score"] > items[1]["score"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    with PoolStore.open(tmp_path / "pool-store", index={"fields": ["$"]}) as store:  # beside the pool
        assert sorted(h.value["text"] for h in store.search(("notes",))) == ["ann drinks green tea", "bob writes rust"]


def test_the_factory_on_an_unreachable_qdrant_server_is_one_clear_error(tmp_path, monkeypatch):
    import importlib.util

    from mtl_graph.memory.store.pool_store import StoreError

    spec = importlib.util.spec_from_file_location("studio_store", ROOT / "graphs" / "store.py")
    factory = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(factory)
    monkeypatch.setenv("MTL_STORE", f"http://127.0.0.1:{_free_port()}")  # nothing listens there
    installed = importlib.util.find_spec("langgraph.store.qdrant") is not None
    with pytest.raises(StoreError, match="cannot set up the store on the Qdrant server" if installed
                       else "needs langgraph-store-qdrant"):
        factory._open()
