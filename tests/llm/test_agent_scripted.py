"""The scripted chat model and action-script files used by tests and the offline demo."""

from __future__ import annotations

import json

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from mtl_graph.agent import TOOLS

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, load_action_script, submit_call


def test_replays_in_order_then_submits_instead_of_cycling():
    model = ScriptedChatModel(responses=[bash_call("ls"), bash_call("pwd")])
    bound = model.bind_tools(TOOLS)
    replies = [bound.invoke([HumanMessage("go")]) for _ in range(4)]
    assert model.bound_tools == ["bash", "submit"]  # what the calls were given
    assert [r.tool_calls[0]["args"] for r in replies[:2]] == [{"command": "ls"}, {"command": "pwd"}]
    assert [r.tool_calls[0]["name"] for r in replies[2:]] == ["submit", "submit"]
    assert replies[2].tool_calls[0]["id"] != replies[3].tool_calls[0]["id"]


def test_without_a_submit_tool_the_final_message_is_text():
    model = ScriptedChatModel(responses=[])
    reply = model.invoke("go")
    assert not reply.tool_calls and "```submit" in reply.content
    custom = ScriptedChatModel(responses=[], final=AIMessage(content="all done"))
    assert custom.invoke("go").content == "all done"


def test_replies_are_copies_so_a_script_can_be_replayed():
    script = [bash_call("ls")]
    first = ScriptedChatModel(responses=script).invoke("go")
    assert first is not script[0] and script[0].id is None


def test_helpers_make_real_tool_calls_with_unique_ids():
    calls = [bash_call("ls"), bash_call("ls"), submit_call("done", thought="finished")]
    ids = {m.tool_calls[0]["id"] for m in calls}
    assert len(ids) == 3
    assert calls[2].content == "finished" and calls[2].tool_calls[0]["args"] == {"summary": "done"}


def test_works_with_langchain_create_agent():
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    call = AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1", "type": "tool_call"}])
    graph = create_agent(ScriptedChatModel(responses=[call]), tools=[add])
    messages = graph.invoke({"messages": [HumanMessage("add 2 and 3")]})["messages"]
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert messages[2].content == "5" and not messages[3].tool_calls


def test_load_action_script_in_both_formats(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"task": "demo", "actions": [{"bash": "ls", "thought": "look"}, {"submit": "done"}]}))
    tool_msgs = load_action_script(path)
    assert [m.tool_calls[0]["name"] for m in tool_msgs] == ["bash", "submit"]
    assert tool_msgs[0].content == "look" and tool_msgs[0].tool_calls[0]["args"] == {"command": "ls"}
    text_msgs = load_action_script(path, action_format="text")
    assert text_msgs[0].content == "look\n\n```bash\nls\n```" and text_msgs[1].content == "```submit\ndone\n```"
    assert not text_msgs[0].tool_calls


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"steps": []}),
        json.dumps({"actions": []}),
        json.dumps({"actions": [{"bash": "ls", "submit": "x"}]}),
        json.dumps({"actions": [{"thought": "only a thought"}]}),
        json.dumps({"actions": [{"run": "ls"}]}),
        json.dumps(["bash", "ls"]),
    ],
)
def test_invalid_scripts_raise_value_error_naming_the_file(tmp_path, content):
    path = tmp_path / "bad-script.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="bad-script.json"):
        load_action_script(path)


def test_missing_script_file_raises_value_error(tmp_path):
    with pytest.raises(ValueError, match="nowhere.json"):
        load_action_script(tmp_path / "nowhere.json")
