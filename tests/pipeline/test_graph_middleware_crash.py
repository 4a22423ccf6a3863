"""A create_agent run that raises never leaves its workspace behind: the middleware logs the run and closes the
workspace when the agent's model or a tool raises, and a process that dies mid-run closes what it opened on exit.

Real components: create_agent, the sandbox tools, the bwrap/local sandbox, the task's files, the run log."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import openai
import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call
from mtl_graph.agent.tools import sandbox_tools
from mtl_graph.core.task import Task
from mtl_graph.pipeline import MemoryTransferMiddleware
from mtl_graph.sandbox.registry import is_open

TASK = Task(id="crash-task", domain="math", instruction="Make f.X equal 2.", files={"f.py": "X = 1\n"})


class Exploding(ScriptedChatModel):
    """Answers its script, then raises the given error instead of the next reply."""

    error: str = "bug"

    def _generate(self, *args, **kwargs):
        if self.exhausted:
            if self.error == "429":
                request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
                raise openai.RateLimitError("429", response=httpx.Response(429, request=request), body=None)
            raise KeyError("the model client broke")
        return super()._generate(*args, **kwargs)


def workspaces(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def run_agent(model, tools, tmp_path, **mtl):
    middleware = MemoryTransferMiddleware(None, model=ScriptedChatModel(), memory_type="none", sandbox="auto",
                                          workspace_root=tmp_path / "ws", run_log=tmp_path / "runs.jsonl", **mtl)
    agent = create_agent(model, tools=tools, middleware=[middleware])
    return agent.invoke({"messages": [HumanMessage(TASK.instruction)], "mtl_task": TASK})


def test_a_model_that_raises_ends_the_run_with_its_workspace_closed(tmp_path):
    model = Exploding(responses=[bash_call("echo 'X = 2' > f.py")])
    with pytest.raises(KeyError, match="the model client broke"):
        run_agent(model, sandbox_tools(), tmp_path)
    assert workspaces(tmp_path / "ws") == []
    [line] = [json.loads(x) for x in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert line["error_kind"] == "crashed" and "KeyError" in line["error"] and line["verdict"]["status"] == "error"
    assert line["new_memory_ids"] == []


def test_a_tool_that_raises_ends_the_run_with_its_sandbox_and_workspace_closed(tmp_path):
    seen = {}

    @tool
    def explode(reason: str) -> str:
        """Fail on purpose."""
        from langgraph.config import get_config

        seen["workspace"] = get_config()["configurable"].get("mtl_workspace")
        raise RuntimeError(f"tool broke: {reason}")

    model = ScriptedChatModel(responses=[bash_call("echo 'X = 2' > f.py"),
                                         bash_call("true").model_copy(update={"tool_calls": [
                                             {"name": "explode", "args": {"reason": "on purpose"}, "id": "c1",
                                              "type": "tool_call"}]})])
    with pytest.raises(Exception, match="tool broke"):
        run_agent(model, [*sandbox_tools(), explode], tmp_path)
    assert workspaces(tmp_path / "ws") == []
    opened = [p for p in (tmp_path / "ws").glob("*")]
    assert opened == [] and not any(is_open(p) for p in opened)


def test_a_transient_provider_error_leaves_the_run_to_a_retry_around_it(tmp_path):
    """A retry middleware outside ours may call again: the run's workspace must still be there for it."""
    model = Exploding(responses=[bash_call("echo 'X = 2' > f.py")], error="429")
    with pytest.raises(openai.RateLimitError):
        run_agent(model, sandbox_tools(), tmp_path)
    [left] = workspaces(tmp_path / "ws")
    assert (tmp_path / "ws" / left / "f.py").read_text() == "X = 2\n"
    from mtl_graph.pipeline.lease import OPEN

    OPEN.close_all()  # what the process does at exit
    assert workspaces(tmp_path / "ws") == []


def test_a_process_that_dies_mid_run_removes_its_workspaces_at_exit(tmp_path):
    script = textwrap.dedent(f"""
        import httpx, openai, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
        from pathlib import Path
        from test_graph_middleware_crash import Exploding, run_agent
        from mtl_graph.llm.scripted import bash_call
        from mtl_graph.agent.tools import sandbox_tools
        tmp = Path({str(tmp_path)!r})
        run_agent(Exploding(responses=[bash_call("echo hi > g.txt")], error="429"), sandbox_tools(), tmp)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "RateLimitError" in done.stderr
    assert (tmp_path / "ws").is_dir() and workspaces(tmp_path / "ws") == []
