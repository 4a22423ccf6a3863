"""`with_memory_transfer` around a scripted agent on the primes exercise (helpers/tampering.py): the planner's
reply, the command that solves it, tool calls by name, the exercise as a task, the wrapped graph."""

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from mtl_graph.bench.suites import load_suite
from mtl_graph.core.task import Task
from mtl_graph.llm.scripted import ScriptedChatModel
from mtl_graph.pipeline import with_memory_transfer
from helpers.tampering import SOLUTION, make_exercism

PLAN = AIMessage("Read the exercise, write the function, run its tests, then answer.")
SOLVE = f"cat > primes.py <<'EOF'\n{SOLUTION}EOF"


def call(name: str, n: int, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"{name}-{n}", "type": "tool_call"}])


def exercism_task(root: Path) -> Task:
    """A real-shaped Exercism Python exercise whose setup removes the reference solution under .meta."""
    [task] = load_suite(f"exercism:{make_exercism(root / 'polyglot')}").tasks
    assert task.setup and ".meta" in task.setup
    return task


def wrap(agent, pool, tmp_path, **options):
    options = {"memory_type": "none", "online": False, "sandbox": "bwrap", **options}
    return with_memory_transfer(agent, pool, model=ScriptedChatModel(responses=[PLAN]),
                                run_log=tmp_path / "runs.jsonl", **options)
