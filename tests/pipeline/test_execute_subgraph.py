"""The agent as the MTL graph's execute subgraph: steps as super-steps, resume after SIGKILL, approval before each
command, provider storms retried, text actions. Scripted models emit real tool calls; real sandbox and files."""

import json
import signal
import subprocess
from pathlib import Path

import httpx
import openai
import pytest
from langchain_core.exceptions import ModelAuthenticationError, ModelRateLimitError
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from mtl_graph.agent import AgentConfig, DefaultAgent

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call, text_action
from mtl_graph.agent.middleware import ProviderRetry
from mtl_graph.llm.retry import RetrySettings, is_transient, retry_after
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.core.task import Task
from helpers.fresh_process import Zygote
from helpers.paths import DRIVERS

DRIVER = DRIVERS / "resumable_run.py"
TASK = Task(id="hello", instruction="Create hello.py that prints 'hello, world'.",
            check="python3 hello.py | grep -qx 'hello, world'")
WRITE = "printf \"print('hello, world')\\n\" > hello.py"


def graph_for(model, tmp_path, **kwargs):
    kwargs.setdefault("memory_type", "none")
    return build_mtl_graph(model, None, online=False, workspace_root=tmp_path / "ws",
                           run_log=tmp_path / "runs.jsonl", **kwargs)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    """Each driver run a new process, forked from one that imported what the driver imports (fresh_process.py)."""
    forks = Zygote(["langchain_core.messages", "langgraph.checkpoint.sqlite", "mtl_graph.agent", "mtl_graph.pipeline",
                    "mtl_graph.core.task"], tmp_path_factory.mktemp("forks"))
    yield forks
    forks.close()


@pytest.fixture
def drive(zygote):
    def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
        return zygote.run(DRIVER, tmp_path / "db.sqlite", tmp_path / "ws", "t1", "6", *args)

    return run


def test_a_run_killed_mid_way_resumes_in_a_new_process_with_every_step_once(drive, tmp_path):
    killed = drive(tmp_path, "--kill-at", "4")  # dies when asked for its 5th reply: four commands have run
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [workspace] = (tmp_path / "ws").glob("t1--*")
    assert sorted(p.name for p in workspace.glob("step_*")) == [f"step_{i}.txt" for i in range(4)]

    resumed = drive(tmp_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout)
    steps = out["trajectory"]["steps"]
    assert [s["action"].split(" ")[1] for s in steps[:-1]] == [str(i) for i in range(6)]
    assert steps[-1]["tool"] == "submit"
    assert out["trajectory"]["exit_status"] == "submitted" and out["error"] is None
    assert out["verdict"]["status"] == "pass" and out["verdict"]["source"] == "tests"
    assert {p.name for p in (tmp_path / "ws").iterdir()} == {workspace.name, "runs.jsonl"}  # the same workspace
    assert (workspace / "log.txt").read_text().split() == [str(i) for i in range(6)]  # no command ran twice
    assert (workspace / "step_0.txt").read_text() == "step 0\n"  # files from before the kill are there


def test_a_text_action_run_killed_mid_way_resumes_too(drive, tmp_path):
    assert drive(tmp_path, "--text", "--kill-at", "3").returncode == -signal.SIGKILL
    resumed = drive(tmp_path, "--text", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout)
    steps = out["trajectory"]["steps"]
    assert [s["reasoning"] for s in steps[:-1]] == [f"Step {i}." for i in range(6)] and steps[-1]["tool"] == "submit"
    assert out["verdict"]["status"] == "pass"
    [workspace] = (tmp_path / "ws").glob("t1--*")
    assert (workspace / "log.txt").read_text().split() == [str(i) for i in range(6)]


def test_a_command_under_way_when_the_process_dies_runs_again_and_is_one_step(zygote, drive, tmp_path):
    import os
    import time

    child = zygote.start(DRIVER, tmp_path / "db.sqlite", tmp_path / "ws", "t1", "6", "--slow-at", "3")
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "ws").glob("t1--*/started")):  # command 3 is running
            assert child.poll() is None and time.monotonic() < deadline, child.err.read_text()
            time.sleep(0.05)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    [workspace] = (tmp_path / "ws").glob("t1--*")
    (workspace / "resumed").touch()
    resumed = drive(tmp_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    steps = json.loads(resumed.stdout)["trajectory"]["steps"]
    assert [s["action"].split(" ")[1] for s in steps[:-1]] == [str(i) for i in range(6)]
    assert (workspace / "log.txt").read_text().split() == ["0", "1", "2", "3", "3", "4", "5"]  # 3 was made again


def test_resuming_a_finished_thread_runs_nothing_again(drive, tmp_path):
    assert drive(tmp_path).returncode == 0
    again = drive(tmp_path, "--resume")
    assert again.returncode == 0, again.stderr
    [workspace] = (tmp_path / "ws").glob("t1--*")
    assert (workspace / "log.txt").read_text().split() == [str(i) for i in range(6)]


def test_a_person_approves_each_command_before_it_runs(tmp_path):
    model = ScriptedChatModel(responses=[bash_call(WRITE), bash_call("python3 hello.py"), submit_call("done")])
    graph = graph_for(model, tmp_path, checkpointer=InMemorySaver(), interrupt_before_tools=True, keep_workspaces=True)
    config = {"configurable": {"thread_id": "review"}}
    state = graph.invoke({"task": TASK}, config)
    pending = []
    while "__interrupt__" in state or graph.get_state(config).next:
        inner = graph.get_state(config, subgraphs=True).tasks[0].state
        while inner.tasks and inner.tasks[0].state is not None:  # down to the agent's own state
            inner = inner.tasks[0].state
        call = inner.values["messages"][-1].tool_calls[0]
        workspace = Path(inner.values["workspace"])
        pending.append((call["name"], (workspace / "hello.py").exists()))
        state = graph.invoke(None, config)  # approve: the command runs, the agent goes on
    assert pending == [("bash", False), ("bash", True), ("submit", True)]  # nothing ran before its approval
    assert state["trajectory"]["exit_status"] == "submitted" and state["verdict"]["status"] == "pass"
    assert [s["observation"] for s in state["trajectory"]["steps"]][1] == "hello, world\n"


def test_a_paused_run_is_approved_from_new_processes(zygote, tmp_path):
    def drive_review(*args):
        out = zygote.run(DRIVER, tmp_path / "db.sqlite", tmp_path / "ws", "t1", "2", "--review", *args)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    seen = [drive_review()]
    while "paused" in seen[-1]:  # each approval in a new process: the sandbox is made again from the path
        [workspace] = (tmp_path / "ws").glob("t1--*")
        pending = seen[-1]["paused"]
        if pending["name"] == "bash":
            n = pending["args"]["command"].split(" ")[1]
            assert not (workspace / f"step_{n}.txt").exists()  # not run before its approval
        seen.append(drive_review("--resume"))
    assert [p["paused"]["name"] for p in seen[:-1]] == ["bash", "bash", "submit"]
    assert seen[-1]["verdict"]["status"] == "pass" and len(seen[-1]["trajectory"]["steps"]) == 3
    assert (workspace / "log.txt").read_text().split() == ["0", "1"]


def test_interrupt_before_tools_needs_the_default_agent(tmp_path):
    class OtherAgent:
        def run(self, task, sandbox, model, memory_block="", on_step=None):
            raise AssertionError("never run")

    with pytest.raises(ValueError, match="needs the default agent"):
        graph_for(ScriptedChatModel(), tmp_path, agent=OtherAgent(), interrupt_before_tools=True)


def test_studio_sees_the_agent_inside_execute(tmp_path):
    graph = graph_for(ScriptedChatModel(), tmp_path)
    nodes = set(graph.get_graph(xray=True).nodes)
    assert {"plan", "retrieve", "judge", "distill", "write_back"} <= nodes
    assert {"execute:prepare", "execute:finish", "execute:agent:model", "execute:agent:tools"} <= nodes


def _status_error(code: int, retry: str | None = None) -> Exception:
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    response = httpx.Response(code, request=request, headers={"retry-after": retry} if retry else {})
    if code == 429:
        return openai.RateLimitError("Error code: 429 - Rate limit reached", response=response, body=None)
    return openai.InternalServerError(f"Error code: {code}", response=response, body=None)


class Flaky(ScriptedChatModel):
    """Fails with the given errors first (one per call), then replays its script; keeps every prompt."""

    failures: list = []
    calls: int = 0
    prompts: list = []

    def _generate(self, messages, *args, **kwargs):
        self.calls += 1
        self.prompts.append(list(messages))
        if self.failures:
            raise self.failures.pop(0)
        return super()._generate(messages, *args, **kwargs)


def test_a_storm_of_429s_and_500s_is_retried_then_the_run_goes_on(tmp_path, monkeypatch):
    slept = []
    monkeypatch.setattr(ProviderRetry, "wait", staticmethod(slept.append))
    failures = [_status_error(429, retry="7"), _status_error(500), httpx.ConnectError("connection reset by peer"),
                openai.APITimeoutError(httpx.Request("POST", "https://x"))]
    model = Flaky(responses=[bash_call(WRITE), submit_call("done")], failures=failures)
    agent = DefaultAgent(AgentConfig(retry=RetrySettings(attempts=5, initial_delay=0.5, max_delay=30)))
    state = graph_for(model, tmp_path, agent=agent).invoke({"task": TASK})
    assert state["error"] is None and state["verdict"]["status"] == "pass"
    assert state["trajectory"]["exit_status"] == "submitted" and len(state["trajectory"]["steps"]) == 2
    assert model.calls == 4 + 2 and len(slept) == 4
    assert slept[0] == 7  # the provider's retry-after wins over the (shorter) backoff
    assert 0.75 <= slept[1] <= 1.25 and 1.5 <= slept[2] <= 2.5  # exponential backoff with jitter


def test_a_storm_that_never_ends_is_an_error_after_the_retries(tmp_path, monkeypatch):
    slept = []
    monkeypatch.setattr(ProviderRetry, "wait", staticmethod(slept.append))
    model = Flaky(responses=[submit_call("never")], failures=[_status_error(503)] * 10)
    agent = DefaultAgent(AgentConfig(retry=RetrySettings(attempts=4)))
    state = graph_for(model, tmp_path, agent=agent, memory_type="insight", distill_formats=["trajectory"],
                      retry={"initial_delay": 0}).invoke({"task": TASK})  # the run's retry keeps the agent's attempts
    # the plan's call and the agent's, four attempts each under the one retry policy (a failed plan costs only it)
    assert model.calls == 4 + 4 and len(slept) == 3
    assert state["error"].startswith("model provider error: InternalServerError (HTTP 503)")
    assert state["verdict"] == {"status": "error", "reason": state["error"], "source": "infrastructure",
                                "tests_modified": [], "dropped": [], "suspicions": []}
    assert state["trajectory"]["exit_status"] == "model_error" and state["distilled"] == []
    assert state["outcome"] == "error"


def test_a_bug_in_the_model_is_not_retried(tmp_path, monkeypatch):
    slept = []
    monkeypatch.setattr(ProviderRetry, "wait", staticmethod(slept.append))
    model = Flaky(responses=[], failures=[KeyError("choices")])
    state = graph_for(model, tmp_path).invoke({"task": TASK})
    assert model.calls == 1 and slept == [] and "KeyError" in state["error"]


@pytest.mark.parametrize(("error", "transient"), [
    (_status_error(429), True), (_status_error(502), True), (_status_error(400), False),
    (openai.APITimeoutError(httpx.Request("POST", "https://x")), True), (ConnectionResetError(), True),
    (httpx.ReadTimeout("slow"), True), (ValueError("bad request body"), False), (KeyError("x"), False),
    (ModelRateLimitError("slow down"), True), (ModelAuthenticationError("bad key"), False),
])
def test_which_provider_errors_are_transient(error, transient):
    assert is_transient(error) is transient


def test_retry_after_forms():
    assert retry_after(_status_error(429, retry="2.5")) == 2.5
    assert retry_after(_status_error(429, retry="Wed, 21 Oct 2015 07:28:00 GMT"), now=1445412470.0) == 10.0
    assert retry_after(_status_error(429, retry="soon")) is None and retry_after(_status_error(429)) is None
    assert retry_after(ValueError()) is None


def test_a_text_action_agent_through_the_graph(tmp_path):
    script = [AIMessage(content="Let me look first."), text_action("bash", WRITE, thought="Write it."),
              text_action("bash", "python3 hello.py"), text_action("submit", "hello.py prints it")]
    model = Flaky(responses=script, prompts=[])
    agent = DefaultAgent(AgentConfig(action_format="text"))
    state = graph_for(model, tmp_path, agent=agent).invoke({"task": TASK})
    assert state["verdict"]["status"] == "pass" and state["trajectory"]["exit_status"] == "submitted"
    steps = state["trajectory"]["steps"]
    assert [s["tool"] for s in steps] == ["bash", "bash", "submit"] and steps[0]["reasoning"] == "Write it."
    assert steps[1]["observation"] == "hello, world\n" and model.bound_tools == []  # no tools bound in text mode
    second = model.prompts[1]  # what the model read after its malformed reply: plain text, the error fed back
    assert [m.type for m in second] == ["system", "human", "ai", "human"] and "found 0 action blocks" in second[3].text
    last = model.prompts[-1]
    assert all(m.type != "tool" and not getattr(m, "tool_calls", None) for m in last)
    assert "<exit_code>0</exit_code>" in last[-1].text and "hello, world" in last[-1].text


def test_a_resumed_thread_whose_workspace_was_deleted_ends_with_a_clear_error(drive, tmp_path):
    from mtl_graph.sandbox.tree import remove_tree

    killed = drive(tmp_path, "--kill-at", "2")
    assert killed.returncode == -signal.SIGKILL
    [workspace] = (tmp_path / "ws").glob("t1--*")
    remove_tree(workspace)  # as root the killed run's workspace is still its quota filesystem: unmounted with it
    resumed = drive(tmp_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout)
    assert out["verdict"]["status"] in ("fail", "error")  # never a pass made in an empty directory
    later = out["trajectory"]["steps"][2:-1]
    assert later and all("no longer exists" in s["observation"] for s in later)  # each command was told why


def test_an_agent_with_only_agent_run_still_runs_in_one_node(tmp_path):
    from mtl_graph.agent import AgentResult
    from mtl_graph.agent.tools import run_command

    class OneShot:
        """Writes the file in one command, tells the graph about it, and submits."""

        def run(self, task, sandbox, model, memory_block="", on_step=None):
            step = run_command(sandbox, WRITE, AgentConfig())
            on_step(step)
            return AgentResult(steps=[step], submission="written", exit_status="submitted")

    graph = graph_for(ScriptedChatModel(), tmp_path, agent=OneShot())
    assert "execute:agent:model" not in graph.get_graph(xray=True).nodes
    kinds, final = [], {}
    for mode, chunk in graph.stream({"task": TASK}, stream_mode=["custom", "values"]):
        if mode == "custom":
            kinds.append(chunk["kind"])
        else:
            final = chunk
    assert final["verdict"]["status"] == "pass" and final["trajectory"]["steps"][0]["exit_code"] == 0
    assert kinds == ["plan", "step", "agent", "verdict"]  # the agent's own events reach the run's stream


def test_only_the_first_action_of_a_reply_runs(tmp_path):
    both = AIMessage(content="", tool_calls=[
        {"name": "bash", "args": {"command": WRITE}, "id": "first", "type": "tool_call"},
        {"name": "bash", "args": {"command": "rm hello.py"}, "id": "second", "type": "tool_call"},
        {"name": "submit", "args": {"summary": "too early"}, "id": "third", "type": "tool_call"}])
    model = Flaky(responses=[both, submit_call("done")], prompts=[])
    state = graph_for(model, tmp_path).invoke({"task": TASK})
    assert state["verdict"]["status"] == "pass"  # hello.py was written and not removed
    assert [s["tool"] for s in state["trajectory"]["steps"]] == ["bash", "submit"]
    answers = {m.tool_call_id: m for m in model.prompts[-1] if m.type == "tool"}
    assert set(answers) == {"first", "second", "third"}
    assert answers["second"].status == "error" and "Not run" in answers["second"].text
    assert answers["third"].status == "error" and state["trajectory"]["submission"] == "done"


def test_the_run_sandbox_is_released_and_a_lent_one_is_handed_back(tmp_path):
    from mtl_graph.sandbox import make_sandbox, registry

    model = ScriptedChatModel(responses=[bash_call("sleep 300 & echo started"), submit_call("done")])
    graph_for(model, tmp_path, keep_workspaces=True).invoke({"task": TASK})
    [workspace] = (tmp_path / "ws").glob("no-thread--*")
    assert not registry.is_open(workspace)  # closed by finish, before the judge's own sandbox

    with make_sandbox("local", TASK.materialize(tmp_path / "own")) as mine:
        result = DefaultAgent().run(TASK, mine, ScriptedChatModel(responses=[bash_call(WRITE), submit_call("ok")]))
        assert result.exit_status == "submitted" and not registry.is_open(mine.workspace)
        assert mine.run("python3 hello.py").output == "hello, world\n"  # still the caller's, still open


def test_the_runs_own_output_cap_and_command_timeout_reach_the_bash_tool(tmp_path):
    """Per-run agent settings from the context (not only the limits) govern each command of that run."""
    long_output = "head -c 5000 /dev/zero | tr '\\0' x"  # no interpreter start: well inside 1 s under load
    model = ScriptedChatModel(responses=[bash_call(long_output), bash_call("sleep 5; echo late"), submit_call("ok")])
    graph = graph_for(model, tmp_path, agent=DefaultAgent(AgentConfig(observation_cap=10_000, command_timeout=60)))
    state = graph.invoke({"task": TASK}, context={"observation_cap": 300, "command_timeout": 1.0})
    first, second = state["trajectory"]["steps"][:2]
    assert len(first["observation"]) < 1000 and first["observation"].startswith("x")  # capped at this run's 300
    assert "late" not in second["observation"] and second["duration_s"] < 5  # this run's 1 s timeout killed it
