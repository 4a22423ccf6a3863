"""Studio with MTL_APPROVE_COMMANDS=1: `langgraph dev` serves graphs/mtl.py pausing before each command; the
pending call is in the thread's state, resuming runs it, and a declined command ends the run cleanly (scripted
model through the run context, real sandbox, pool and run log)."""

from pathlib import Path

import pytest

from helpers.paths import ROOT
from helpers.studio import langgraph_dev, log_lines

SCRIPT = ROOT / "examples" / "tasks" / "slugify" / "demo_script.json"
TASK = {"task": str(ROOT / "examples" / "tasks" / "slugify")}
CONTEXT = {"model": f"scripted:{SCRIPT}", "memory_type": "trajectory"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the module: each test counts the run log from where it stood when the test began."""
    with langgraph_dev(tmp_path_factory.mktemp("approve"), MTL_APPROVE_COMMANDS="1") as (client, tmp_path):
        yield client, tmp_path


def paused_agent(state: dict) -> dict | None:
    """The agent's own state in a thread state read with subgraphs=True, when the run waits inside execute."""
    if state["next"] != ["execute"]:
        return None
    inner = state["tasks"][0]["state"]
    while inner.get("tasks") and inner["tasks"][0].get("state"):
        inner = inner["tasks"][0]["state"]
    return inner


def pending_call(client, thread: str) -> dict | None:
    agent = paused_agent(client.threads.get_state(thread, subgraphs=True))
    if agent is None:
        return None
    assert agent["next"] == ["tools"]
    [call] = agent["values"]["messages"][-1]["tool_calls"]
    return {"name": call["name"], "args": call["args"], "workspace": agent["values"]["workspace"]}


def test_studio_pauses_before_each_command_and_resumes_to_the_end(served):
    client, tmp_path = served
    logged = len(log_lines(tmp_path))
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "mtl", input=TASK, context=CONTEXT)
    seen, workspaces = [], set()
    while (call := pending_call(client, thread)) is not None:
        workspaces.add(call["workspace"])
        if call["name"] == "bash" and call["args"]["command"].startswith("python3 -m unittest"):
            assert "re.sub" in (Path(call["workspace"]) / "slug.py").read_text()  # the approved edit ran
        if call["name"] == "bash" and call["args"]["command"].startswith("cat > slug.py"):
            assert "NotImplementedError" in (Path(call["workspace"]) / "slug.py").read_text()  # not yet run
        seen.append(call["name"])
        out = client.runs.wait(thread, "mtl", input=None, context=CONTEXT)  # approve: run it, go on
        assert len(seen) <= 4
    assert seen == ["bash", "bash", "bash", "submit"]
    assert out["error"] is None and out["verdict"]["status"] == "pass" and len(out["new_memory_ids"]) == 1
    [line] = log_lines(tmp_path)[logged:]
    assert len(line["steps"]) == 4 and line["exit_status"] == "submitted"
    [workspace] = workspaces  # one workspace across the pauses, removed after write back
    assert not Path(workspace).exists()


def test_studio_declines_a_command_by_ending_the_execute_stage(served):
    """Declining from Studio (or any client): update the thread as the execute stage with an error; write back
    logs the run and removes the workspace; the command never runs."""
    client, tmp_path = served
    logged = len(log_lines(tmp_path))
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "mtl", input=TASK, context=CONTEXT)
    first = pending_call(client, thread)
    assert first["args"]["command"] == "ls && cat slug.py test_slug.py"
    client.threads.update_state(thread, {"error": "declined: ls", "workspace": first["workspace"]},
                                as_node="execute")
    out = client.runs.wait(thread, "mtl", input=None, context=CONTEXT)
    assert out["error"] == "declined: ls" and out["verdict"]["status"] == "error" and out["new_memory_ids"] == []
    [line] = log_lines(tmp_path)[logged:]
    assert line["error"] == "declined: ls" and line["task"]["id"] == "examples/slugify" and "steps" not in line
    assert not Path(first["workspace"]).exists()
    assert client.threads.get_state(thread)["next"] == []
