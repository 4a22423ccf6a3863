"""`pipeline/approval.py` on a compiled graph: the pending calls of a run paused before a command, and declining one
(the run is logged with the reason, nothing more runs, the workspace is removed). Scripted models, real sandbox."""

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from mtl_graph.agent import AgentConfig, DefaultAgent

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call, text_action
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.pipeline.approval import DECLINED, decline, pending_calls
from mtl_graph.core.task import Task

TASK = Task(id="hello", instruction="Create hello.py that prints 'hello, world'.",
            check="python3 hello.py | grep -qx 'hello, world'")
WRITE = "printf \"print('hello, world')\\n\" > hello.py"


def paused_graph(tmp_path, model, **kwargs):
    graph = build_mtl_graph(model, None, memory_type="none", online=False, workspace_root=tmp_path / "ws",
                            run_log=tmp_path / "runs.jsonl", checkpointer=InMemorySaver(),
                            interrupt_before_tools=True, **kwargs)
    config = {"configurable": {"thread_id": "approve"}}
    graph.invoke({"task": TASK}, config)
    return graph, config


def test_text_actions_pause_with_the_parsed_command_and_a_decline_ends_the_run(tmp_path):
    model = ScriptedChatModel(responses=[text_action("bash", "touch first.txt", "Look first."),
                                         text_action("bash", WRITE), text_action("submit", "done")])
    graph, config = paused_graph(tmp_path, model, agent=DefaultAgent(AgentConfig(action_format="text")))
    [first] = pending_calls(graph, config)
    assert first["name"] == "bash" and first["args"]["command"] == "touch first.txt"
    graph.invoke(None, config)  # approved
    [second] = pending_calls(graph, config)
    assert second["args"]["command"] == WRITE
    [workspace] = (tmp_path / "ws").glob("approve--*")
    assert (workspace / "first.txt").exists() and not (workspace / "hello.py").exists()

    decline(graph, config, "declined: the write")
    assert pending_calls(graph, config) == []
    out = graph.invoke(None, config)
    assert out["error"] == "declined: the write" and out["verdict"]["status"] == "error"
    assert out["trajectory"]["exit_status"] == DECLINED
    assert [s["action"] for s in out["trajectory"]["steps"]] == ["touch first.txt"]
    assert out["trajectory"]["steps"][0]["reasoning"] == "Look first."
    assert not workspace.exists() and graph.get_state(config).next == ()
    [line] = [json.loads(x) for x in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert line["error"] == "declined: the write" and line["exit_status"] == DECLINED


def test_declining_a_submit_keeps_every_command_run(tmp_path):
    model = ScriptedChatModel(responses=[bash_call(WRITE), submit_call("done")])
    graph, config = paused_graph(tmp_path, model)
    graph.invoke(None, config)
    [call] = pending_calls(graph, config)
    assert call == {"name": "submit", "args": call["args"], "id": call["id"]} and call["args"]
    decline(graph, config, "not yet")
    out = graph.invoke(None, config)
    assert [s["tool"] for s in out["trajectory"]["steps"]] == ["bash"] and out["trajectory"]["submission"] is None
    assert out["new_memory_ids"] == [] and out["error"] == "not yet"


def test_only_a_run_paused_before_a_command_can_be_declined(tmp_path):
    graph, config = paused_graph(tmp_path, ScriptedChatModel(responses=[submit_call("done")]))
    graph.invoke(None, config)  # approved: the run ends
    assert pending_calls(graph, config) == []
    with pytest.raises(ValueError, match="not paused before a command"):
        decline(graph, config, "too late")
    with pytest.raises(ValueError, match="not paused before a command"):
        decline(graph, {"configurable": {"thread_id": "never-started"}}, "nothing")
