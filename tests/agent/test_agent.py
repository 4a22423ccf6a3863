"""The default agent loop, driven by a scripted model against real sandboxes."""

from __future__ import annotations

import time

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from mtl_graph.agent import AgentConfig, DefaultAgent

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call, text_action
from mtl_graph.llm.retry import RetrySettings
from mtl_graph.sandbox import BwrapSandbox, make_sandbox
from mtl_graph.core.task import Task

TASK = Task(
    id="hello",
    instruction="Create hello.py that prints 'hello, world'.",
    check="python3 hello.py | grep -qx 'hello, world'",
)
WRITE = "cat > hello.py <<'EOF'\nprint('hello, world')\nEOF"
KINDS = ["local", pytest.param("bwrap", marks=pytest.mark.skipif(not BwrapSandbox.is_available(), reason="no bwrap"))]


@pytest.fixture
def sandbox(tmp_path):
    with make_sandbox("local", TASK.materialize(tmp_path / "ws")) as sb:
        yield sb


def run(responses, sandbox, memory_block="", on_step=None, model=None, **config):
    model = model or ScriptedChatModel(responses=responses)
    return DefaultAgent(AgentConfig(**config)).run(TASK, sandbox, model, memory_block=memory_block, on_step=on_step)


@pytest.mark.parametrize("kind", KINDS)
def test_tool_call_mode_solves_a_task(tmp_path, kind):
    seen = []
    script = [bash_call(WRITE, thought="Write the script."), bash_call("python3 hello.py"), submit_call("hello.py prints it")]
    with make_sandbox(kind, TASK.materialize(tmp_path)) as sb:
        result = run(script, sb, on_step=seen.append)
        assert sb.run(TASK.check).exit_code == 0
    assert result.exit_status == "submitted" and result.submission == "hello.py prints it"
    assert [s.tool for s in result.steps] == ["bash", "bash", "submit"] and seen == result.steps
    first, second = result.steps[:2]
    assert first.reasoning == "Write the script." and first.args == {"command": WRITE} and first.exit_code == 0
    assert second.observation == "hello, world\n" and second.duration_s is not None
    tool_msgs = [m for m in result.messages if isinstance(m, ToolMessage)]
    calls = [m.tool_calls[0]["id"] for m in result.messages if isinstance(m, AIMessage)]
    assert [m.tool_call_id for m in tool_msgs] == calls
    assert "<exit_code>0</exit_code>" in tool_msgs[1].content and "hello, world" in tool_msgs[1].content


@pytest.mark.parametrize("kind", KINDS)
def test_text_mode_solves_a_task(tmp_path, kind):
    script = [
        text_action("bash", WRITE, thought="I will write the script."),
        text_action("bash", "python3 hello.py"),
        text_action("submit", "Created hello.py."),
    ]
    with make_sandbox(kind, TASK.materialize(tmp_path)) as sb:
        result = run(script, sb, action_format="text")
        assert sb.run(TASK.check).exit_code == 0
    assert result.exit_status == "submitted" and result.submission == "Created hello.py."
    assert result.steps[0].reasoning == "I will write the script." and result.steps[0].action == WRITE
    assert not any(isinstance(m, ToolMessage) for m in result.messages)
    assert "hello, world" in result.messages[5].content  # system, task, ai, obs, ai, obs


def test_text_mode_format_errors_are_fed_back_and_capped(sandbox):
    two = text_action("bash", "ls").content + "\n" + text_action("bash", "pwd").content
    script = [AIMessage(content="I think I am done."), AIMessage(content=two), AIMessage(content="```python\nprint(1)\n```")]
    result = run(script + [text_action("submit", "never reached")], sandbox, action_format="text")
    assert result.exit_status == "format_errors" and result.steps == []
    feedback = [m.content for m in result.messages[2:] if isinstance(m, HumanMessage)]
    assert len(feedback) == 3 and all("not a valid action" in f for f in feedback)
    assert "found 0 action blocks" in feedback[0] and "found 2 action blocks" in feedback[1]


def test_format_error_count_resets_after_a_good_action(sandbox):
    bad = AIMessage(content="no block")
    script = [bad, bad, text_action("bash", "true"), bad, bad, text_action("submit", "ok")]
    result = run(script, sandbox, action_format="text", max_consecutive_format_errors=3)
    assert result.exit_status == "submitted" and len(result.steps) == 2


def test_bad_tool_call_arguments_get_error_tool_messages(sandbox):
    def call(name, args, call_id):
        return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])

    script = [call("bash", {"cmd": "ls"}, "c1"), call("bash", {"command": 5}, "c2"), call("python", {"code": "1"}, "c3"),
              AIMessage(content="plain text, no call"), submit_call("done")]  # fmt: skip
    result = run(script, sandbox, max_consecutive_format_errors=5)
    assert result.exit_status == "submitted" and [s.tool for s in result.steps] == ["submit"]
    errors = {m.tool_call_id: m for m in result.messages if isinstance(m, ToolMessage) and m.status == "error"}
    assert set(errors) == {"c1", "c2", "c3"}
    assert "command" in errors["c1"].content and "cmd" in errors["c1"].content
    assert "valid string" in errors["c2"].content and "unknown tool 'python'" in errors["c3"].content
    assert any(isinstance(m, HumanMessage) and "no tool call" in m.content for m in result.messages)


def test_unparsable_tool_arguments_count_as_format_errors(sandbox):
    bad = {"name": "bash", "args": "{not json", "id": "c9", "error": None, "type": "invalid_tool_call"}
    broken = AIMessage(content="", invalid_tool_calls=[bad])
    result = run([broken] * 3, sandbox)
    assert result.exit_status == "format_errors"
    assert sum(isinstance(m, ToolMessage) and "not valid JSON" in m.content for m in result.messages) == 3


def test_step_limit(sandbox):
    result = run([bash_call(f"echo {i}") for i in range(10)], sandbox, step_limit=3)
    assert result.exit_status == "step_limit" and [s.observation for s in result.steps] == ["0\n", "1\n", "2\n"]


def test_wall_time_limit_also_bounds_a_long_command(sandbox):
    start = time.monotonic()
    result = run([bash_call("sleep 30")] * 5, sandbox, wall_time_limit=1.5, command_timeout=60)
    assert result.exit_status == "time_limit"
    assert time.monotonic() - start < 5
    assert result.steps[0].exit_code == 124 and "killed after" in result.steps[0].observation


def test_token_limit_sums_usage_metadata(sandbox):
    reply = bash_call("true")
    reply.usage_metadata = {"input_tokens": 60, "output_tokens": 40, "total_tokens": 100}
    result = run([reply] * 10, sandbox, token_limit=250)
    assert result.exit_status == "token_limit" and len(result.steps) == 3
    assert (result.tokens.input, result.tokens.output) == (180, 120)


class BrokenModel(ScriptedChatModel):
    def _generate(self, *args, **kwargs):
        raise RuntimeError("provider is down")


def test_model_exception_ends_the_run_without_raising(sandbox):
    result = run([], sandbox, model=BrokenModel())
    assert result.exit_status == "model_error" and "provider is down" in result.error
    assert result.submission is None


def test_model_without_tool_support_is_a_model_error(sandbox):
    result = run([], sandbox, model=FakeMessagesListChatModel(responses=[submit_call("x")]))
    assert result.exit_status == "model_error" and "NotImplementedError" in result.error


@pytest.mark.parametrize("mode", ["tool_calls", "text"])
def test_memory_block_is_appended_once_at_the_end_of_the_system_prompt(sandbox, mode):
    block = "## Memories from other tasks\n- Verify before relying on a memory."
    result = run([], sandbox, memory_block=block, action_format=mode)
    system = result.messages[0]
    assert isinstance(system, SystemMessage) and system.content.endswith(block)
    assert sum(m.text.count("Memories from other tasks") for m in result.messages) == 1
    plain = run([], sandbox, action_format=mode).messages[0].content
    assert system.content == plain + "\n\n" + block and not plain.endswith("\n")


def test_long_output_is_capped_before_the_model_sees_it(sandbox):
    result = run([bash_call("seq 1 50000")], sandbox, observation_cap=500)
    obs = result.steps[0].observation
    assert "characters cut" in obs and obs.startswith("1\n2\n") and obs.endswith("50000\n") and len(obs) < 600


def test_prompt_templates_can_be_overridden(sandbox, tmp_path):
    (tmp_path / "instance.md").write_text("Custom: $instruction")
    result = run([], sandbox, prompts_dir=tmp_path)
    assert result.messages[1].content == f"Custom: {TASK.instruction}"
    assert "bash" in result.messages[0].content  # files not overridden come from the package


def test_the_agent_graph_runs_natively_async(sandbox):
    import asyncio

    from mtl_graph.agent.default import DirectRun
    from mtl_graph.agent.loop import opening_messages, result_of
    from mtl_graph.agent.tools import ON_STEP_KEY
    from mtl_graph.sandbox.registry import lent

    class Flaky(ScriptedChatModel):
        failures: int = 1

        async def _agenerate(self, *args, **kwargs):
            if self.failures:
                self.failures -= 1
                raise ConnectionResetError("reset by peer")
            return self._generate(*args, **kwargs)

    agent, seen = DefaultAgent(AgentConfig(retry=RetrySettings(initial_delay=0.01))), []
    model = Flaky(responses=[bash_call(WRITE, thought="Write it."), submit_call("done")])
    start = {"messages": opening_messages(agent.config, TASK), "workspace": str(sandbox.workspace)}
    with lent(sandbox.workspace, sandbox):
        hook = {"configurable": {ON_STEP_KEY: lambda step, runtime: seen.append(step)}}  # the one step channel
        state = asyncio.run(agent.graph.ainvoke(start, hook, context=DirectRun(model)))
    result = result_of(state, agent.config)
    assert result.error is None, result.error
    assert result.exit_status == "submitted" and [s.tool for s in result.steps] == ["bash", "submit"]
    assert result.steps[0].reasoning == "Write it." and seen == result.steps
    assert model.failures == 0 and sandbox.run(TASK.check).exit_code == 0  # the reset was retried
