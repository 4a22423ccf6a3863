"""Running one command for an agent, and the `bash` tool that does it in the run's sandbox.

`run_command` is the one implementation of an agent step (timeout, output cap, timeout note); the default agent
and `sandbox_tools` (a bash tool for anyone's `create_agent` agent) both use it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from mtl_graph.agent.config import AgentConfig
from mtl_graph.agent.actions import FORMATS, BashArgs, SubmitArgs
from mtl_graph.agent.templates import render
from mtl_graph.core.trajectory import Step
from mtl_graph.sandbox.base import Sandbox, SandboxError
from mtl_graph.sandbox.process import cap_text


def run_command(sandbox: Sandbox, command: str, config: AgentConfig, timeout: float | None = None,
                reasoning: str | None = None) -> Step:
    """Run one command in the sandbox and record it as a step (a sandbox failure is an observation, not a crash)."""
    timeout = config.command_timeout if timeout is None else timeout
    begin = time.monotonic()
    try:
        res = sandbox.run(command, timeout=timeout)
    except SandboxError as exc:  # the model sees it and may work around it
        return Step(reasoning=reasoning, action=command, args={"command": command},
                    observation=f"sandbox error: {exc}", duration_s=round(time.monotonic() - begin, 3))
    output, _ = cap_text(res.output, config.observation_cap)
    if res.timed_out:
        output = render("timeout_note.md", config.prompts_dir, timeout=round(timeout, 1)) + "\n" + output
    return Step(reasoning=reasoning, action=command, args={"command": command}, observation=output,
                exit_code=res.exit_code, duration_s=res.duration_s)


def render_observation(step: Step, config: AgentConfig) -> str:
    """What the model reads after a command: its exit code and (capped) output."""
    code = "unknown" if step.exit_code is None else step.exit_code
    return render("observation.md", config.prompts_dir, exit_code=code, output=step.observation.rstrip("\n"))


def command_timeout(config: AgentConfig, elapsed: float = 0.0) -> float:
    """Seconds the next command may run: the configured timeout, never beyond the run's wall time left."""
    if config.wall_time_limit is None:
        return config.command_timeout
    return max(1.0, min(config.command_timeout, config.wall_time_limit - elapsed))


ON_STEP_KEY = "__mtl_on_step"
"""configurable key: the run's step hook, the one channel every host's steps go through. Our tools (bash, submit,
search_memories) call it as `hook(step, runtime)` after each call; text it returns is shown to the model after the
observation, and it may record what it did in the step's `args` (the artifact is taken after it). Its leading
underscores keep it out of checkpoint metadata (a LangGraph server stores the other configurable keys there)."""

SEARCH_TOOL = "search_memories"
"""The memory tool's name (mtl_graph/pipeline/memory_tool.py)."""
RECORDING_TOOLS = ("bash", "submit", SEARCH_TOOL)
"""Our tools: each one's artifact is the Step it recorded."""


def recorded_step(message: Any) -> dict[str, Any] | None:
    """The step one of our tools recorded, from its tool message (the artifact), or None. Only our tools' messages
    count: a tool of the agent's own may return any dict as its artifact (a file it read, say), and that is never
    taken for a recorded step or for what a re-retrieval found."""
    if not isinstance(message, ToolMessage) or message.name not in RECORDING_TOOLS:
        return None
    artifact = message.artifact
    return artifact if isinstance(artifact, dict) and artifact.get("tool") == message.name else None


WORKSPACE_BASE = "mtl_workspace_base"
"""configurable key: when set, a run's workspace must be a directory right under it. A served graph sets it (a
client's thread update must not point the agent's sandbox at a directory of the server's)."""


def configurable_of(runtime: Any) -> dict[str, Any]:
    return (getattr(runtime, "config", None) or {}).get("configurable") or {}


def thought_of(runtime: Any, cfg: AgentConfig) -> str | None:
    """The text of the reply that made this tool call, in the run's action format (only a reply's first action
    runs, so it is this call's)."""
    call_id = getattr(runtime, "tool_call_id", None)
    state = getattr(runtime, "state", None)
    messages = state.get("messages", []) if isinstance(state, dict) else []
    for m in reversed(messages):
        if isinstance(m, AIMessage) and any(c.get("id") == call_id for c in m.tool_calls):
            return FORMATS[cfg.action_format](cfg.prompts_dir).reasoning(m) or None
    return None


def tell_step(runtime: Any, step: Step) -> str | None:
    """Hand the step to the run's hook (`configurable[ON_STEP_KEY]`), if any; its note for the model, else None."""
    hook = configurable_of(runtime).get(ON_STEP_KEY)
    return hook(step, runtime) if callable(hook) else None


def workspace_of(runtime: Any) -> str | None:
    """The run's workspace: the agent state's `workspace`, else `configurable["mtl_workspace"]`; SandboxError when
    `configurable[WORKSPACE_BASE]` is set and the workspace is not right under it."""
    state = getattr(runtime, "state", None) or {}
    configurable = configurable_of(runtime)
    workspace = str(state["workspace"]) if isinstance(state, dict) and state.get("workspace") else \
        configurable.get("mtl_workspace")
    base = configurable.get(WORKSPACE_BASE)
    if workspace and base is not None and Path(workspace).resolve().parent != Path(base).resolve():
        raise SandboxError(f"workspace {workspace[:80]!r} is not one this server made for the run")
    return workspace


def sandbox_tools(sandbox: Sandbox | None = None, *, kind: str = "auto", config: AgentConfig | None = None,
                  settings: Callable[[Any], AgentConfig] | None = None) -> list[BaseTool]:
    """A `bash` tool for any LangChain agent, running each command in a sandbox.

    With `sandbox`, every call runs there. Without it, the call runs in the sandbox of the run's workspace (see
    `workspace_of`; `with_memory_transfer` and `MemoryTransferMiddleware` set it) from the per-process registry:
    the sandbox the task's setup ran in, closed when the agent ends. The tool's artifact is the recorded step
    (command, exit code, output, duration); the run's step hook (`tell_step`) is called with it and what it returns
    (a re-retrieval note) is shown after the observation. `settings` gives the run's own AgentConfig
    (per-run command timeout and output cap) from the tool's runtime; else `config` holds for every run."""
    from mtl_graph.sandbox.registry import sandbox_for

    built = config or AgentConfig()

    def bash(command: Annotated[str, "The shell command to run."],
             runtime: ToolRuntime[Any, Any]) -> tuple[str, dict[str, Any]]:
        cfg = settings(runtime) if settings is not None else built
        thought, box = thought_of(runtime, cfg), sandbox
        if box is None:
            try:
                workspace = workspace_of(runtime)
            except SandboxError as exc:  # nothing runs; the model is told, like any sandbox failure
                step = Step(reasoning=thought, action=command, args={"command": command},
                            observation=f"sandbox error: {exc}")
                return render_observation(step, cfg), step.model_dump(mode="json")
            if not workspace:
                raise SandboxError("no workspace for this run: pass a sandbox to sandbox_tools, or run the agent "
                                   "through with_memory_transfer or with MemoryTransferMiddleware")
            try:
                box = sandbox_for(workspace, kind)
            except SandboxError as exc:  # told to the model like any sandbox failure
                step = Step(reasoning=thought, action=command, args={"command": command},
                            observation=f"sandbox error: {exc}")
                return render_observation(step, cfg), step.model_dump(mode="json")
        state = getattr(runtime, "state", None) or {}
        elapsed = state.get("elapsed", 0.0) if isinstance(state, dict) else 0.0  # our agent's clock, if any
        step = run_command(box, command, cfg, timeout=command_timeout(cfg, elapsed), reasoning=thought)
        note = tell_step(runtime, step)  # the run's hook: the step event, re-retrieval after a failing test run
        observation = render_observation(step, cfg) + (f"\n\n{note}" if note else "")
        return observation, step.model_dump(mode="json")

    return [StructuredTool.from_function(bash, name="bash", description=BashArgs.__doc__,
                                         response_format="content_and_artifact")]


def submit_tool(settings: Callable[[Any], AgentConfig] | None = None) -> BaseTool:
    """The `submit` tool: ends the run (return_direct); its artifact is the submission's step."""

    def submit(summary: Annotated[str, "A short summary of what was done."],
               runtime: ToolRuntime[Any, Any]) -> tuple[str, dict[str, Any]]:
        cfg = settings(runtime) if settings is not None else AgentConfig()
        step = Step(reasoning=thought_of(runtime, cfg), action=summary, tool="submit", args={"summary": summary})
        tell_step(runtime, step)
        return "Submitted.", step.model_dump(mode="json")

    return StructuredTool.from_function(submit, name="submit", description=SubmitArgs.__doc__, return_direct=True,
                                        response_format="content_and_artifact")
