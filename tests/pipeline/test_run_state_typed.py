"""RunState, the pydantic run state: typed at every node, plain JSON in the channels, malformed updates refused,
the other run shapes derived from it, and the middleware's dict run updated with the graph's own reducers."""

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Overwrite
from pydantic import ValidationError

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.core.task import Task
from mtl_graph.core.trajectory import Trajectory, Verdict
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.pipeline.execute import ExecuteState
from mtl_graph.pipeline.state import INSIDE, MTLOutput, RunState, apply_update, fresh_run_state

TASK = Task(id="typed", instruction="Create ok.txt.", check="test -f ok.txt")


def paused_run(tmp_path):
    """A run paused before distill (its verdict and trajectory are in the thread's state)."""
    model = ScriptedChatModel(responses=[bash_call("touch ok.txt"), submit_call("done")])
    graph = build_mtl_graph(model, None, memory_type="none", online=False, workspace_root=tmp_path / "ws",
                            run_log=tmp_path / "runs.jsonl", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "typed"}}
    graph.invoke({"task": TASK}, config, interrupt_before=["distill"])
    return graph, config


def test_the_channels_hold_plain_json_while_the_stages_read_typed_values(tmp_path):
    graph, config = paused_run(tmp_path)
    values = graph.get_state(config).values
    assert isinstance(values["verdict"], dict) and isinstance(values["trajectory"], dict)
    json.dumps({k: v for k, v in values.items() if k != "messages"})  # any checkpointer or server can store it
    state = RunState.of(values)
    assert isinstance(state.trajectory, Trajectory) and isinstance(state.verdict, Verdict)
    assert state.verdict.status.value == "pass" and state.trajectory.steps[0].action == "touch ok.txt"
    out = graph.invoke(None, config)
    assert out["verdict"]["status"] == "pass" and out["error"] is None and isinstance(out["trajectory"], dict)


@pytest.mark.parametrize("update", [
    {"verdict": "pass"},
    {"verdict": {"status": "maybe", "source": "tests"}},
    {"trajectory": 5},
    {"trajectory": {"steps": "rm -rf /"}},
    {"retrieved": "all of them"},
    {"timings": {"plan": "slow"}},
    {"cost": ["lots"]},
])
def test_a_malformed_thread_update_is_refused_and_the_run_goes_on_unharmed(tmp_path, update):
    graph, config = paused_run(tmp_path)
    with pytest.raises((ValidationError, TypeError)):  # the schema refuses it (a reducer field: its reducer)
        graph.update_state(config, update)
    out = graph.invoke(None, config)
    assert out["verdict"]["status"] == "pass" and out["error"] is None
    assert [json.loads(line)["verdict"]["status"] for line in (tmp_path / "runs.jsonl").read_text().splitlines()] \
        == ["pass"]


def test_every_other_run_shape_is_a_projection_of_run_state():
    fields = set(RunState.model_fields)
    assert set(MTLOutput.__annotations__) == fields - set(INSIDE)
    assert set(ExecuteState.__annotations__) - {"exit_status", "malformed"} <= fields
    assert set(fresh_run_state()) == fields - {"task"}
    assert all(info.description for info in RunState.model_fields.values())  # one docstring per field


def test_apply_update_follows_the_graphs_reducers():
    run = {"timings": {"plan": 1.0}, "messages": [HumanMessage("hi", id="h")], "error": None}
    apply_update(run, {"timings": {"retrieve": 2.0}, "messages": [AIMessage("yo", id="a")], "error": "boom"})
    assert run["timings"] == {"plan": 1.0, "retrieve": 2.0} and [m.id for m in run["messages"]] == ["h", "a"]
    assert run["error"] == "boom"
    apply_update(run, {"timings": Overwrite({"judge": 3.0}), "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)]})
    assert run["timings"] == {"judge": 3.0} and run["messages"] == []
    fresh: dict = {}
    apply_update(fresh, {"cost": {"plan": {"calls": 1}}, "first_message": 4})  # a host's own key is kept as given
    assert fresh == {"cost": {"plan": {"calls": 1}}, "first_message": 4}
    assert RunState.of({**fresh, "verdict": {"status": "fail", "source": "tests"}}).verdict.status.value == "fail"
