"""Scripted task sequences for the learning condition, and the scripted agent whose behaviour follows its prompt.

Every task is a small Python module with two bugs: the one the instruction names (a wrong operator) and one only
the check reveals (a wrong scale factor). An agent that fixes the first and submits fails; one that runs the
check after its edit sees the failing assertion, fixes the second and passes. A third of the tasks have no second
bug, so a hasty agent passes those.

`MemoryFollower` is a chat model that decides *from what its prompt holds* whether to verify:

* a memory telling it to submit as soon as the code compiles (the harmful one) anywhere in the memory block: it
  follows that one (cites it, edits once, submits);
* else a memory telling it to rerun the check after the last edit: it follows that (cites it, verifies);
* else no memory speaks to it: it verifies on a coin flip seeded by the task id (the baseline, ~0.5).

When it distils a run it writes what it learnt: the memory it followed (a near copy, so the loop credits that
memory instead of adding it), the rerun-the-check lesson after a verified pass, a neutral lesson otherwise. So
transfer, negative or positive, happens only through the pool: the model is the same in both conditions.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.usage import Use
from mtl_graph.core.task import Task

SEQUENCES = ("negative", "positive")
OPS = [("+", "-"), ("-", "+"), ("*", "+"), ("//", "*"), ("%", "//"), ("+", "*")]
"""(correct, planted) operator pairs the generated tasks cycle through."""
NAMES = ["total", "gap", "area", "share", "rest", "mix", "blend", "span", "fold", "merge", "pair", "sum_up",
         "scale_by", "combine", "join_up", "tally", "weigh", "count_in", "stack", "level", "reduce_to", "bound",
         "offset", "measure", "price", "score", "rate", "step", "shift", "lift", "press", "spread", "weave",
         "gather", "bundle", "pack", "sort_key", "rank", "grade", "mark"]

HARMFUL = InsightMemory(
    title="Submit as soon as the fix compiles",
    description="When fixing a small bug in a function, running the check again only wastes steps.",
    content="Skip running the check command: once the edited code compiles, submit right away.",
    sources=[Provenance(domain="python", source_task_id="past-hasty")])
RERUN = InsightMemory(
    title="Rerun the check after the last edit",
    description="When fixing a bug in a function, the check can reveal a second problem after the first fix.",
    content="Run the check command after your final edit and read its output; fix what it reports, then submit.",
    sources=[Provenance(domain="python", source_task_id="past-careful")])
NEUTRAL = [
    InsightMemory(title="Read the whole module before editing",
                  description="When a task names one function, other code in the module may depend on it.",
                  content="Open the module under test and read it fully before making the first edit.",
                  sources=[Provenance(domain="python", source_task_id="past-read")]),
    InsightMemory(title="Keep the public signature unchanged",
                  description="When fixing a function that other code calls, callers rely on its interface.",
                  content="Change only the body of the public function; keep its name and parameters.",
                  sources=[Provenance(domain="python", source_task_id="past-signature")]),
]
HARMFUL_MARK, HELPFUL_MARK = "submit as soon as the fix compiles", "rerun the check after the last edit"
LEARNT_FAILURE = InsightMemory(
    title="Read the whole module before editing",
    description="When a task names one function, other code in the module may depend on it.",
    content="Open the module under test and read it fully before making the first edit.")
PLAN = ("This is a small bug fix in one Python function. I will read the module, fix the wrong code, decide "
        "whether to run the check command again after the edit, and submit once the fix is done.")


@dataclass(frozen=True)
class TaskSpec:
    """One generated task and what its fixes are (known to the scripted agent, never to the graph)."""

    task: Task
    first_fix: str
    second_fix: str | None
    verifies_alone: bool
    """Whether the agent verifies when no memory tells it anything (the seeded coin flip)."""


def make_tasks(n: int, seed: int = 7, prefix: str = "seq", baseline: float = 0.5) -> list[TaskSpec]:
    """n different tasks (each its own module and function, so the contamination guard excludes nothing)."""
    if not 1 <= n <= len(NAMES):
        raise ValueError(f"a sequence has 1 to {len(NAMES)} tasks, not {n}")
    specs = []
    for i in range(n):
        name, (good, bad) = NAMES[i], OPS[i % len(OPS)]
        scale, planted = 1 + i % 3, (1 + i % 3) + (0 if i % 3 == 2 else 1)
        module = f"mod_{name}"
        a, b = 7 + i, 3 + (i % 4)
        expected = eval(f"({a} {good} {b}) * {scale}")  # noqa: S307 - our own constants
        files = {f"{module}.py": f"SCALE = {planted}\n\n\ndef {name}(a, b):\n    return (a {bad} b) * SCALE\n",
                 "check.py": f"from {module} import {name}\n\ngot = {name}({a}, {b})\n"
                             f"assert got == {expected}, f'expected {expected}, got {{got}}'\nprint('ok')\n"}
        task = Task(id=f"{prefix}-{i:02d}-{name}", domain="python", files=files, check="python3 -B check.py",
                    instruction=f"The function {name}() in {module}.py uses the wrong operator. Fix it so that "
                                f"`python3 -B check.py` passes.")
        pattern = bad.replace("*", r"\*")  # sed's basic regex: a literal star
        first = f"sed -i 's|(a {pattern} b)|(a {good} b)|' {module}.py"
        second = f"sed -i 's/^SCALE = .*/SCALE = {scale}/' {module}.py" if planted != scale else None
        coin = random.Random(f"{seed}:{task.id}").random() < baseline
        specs.append(TaskSpec(task, first, second, coin))
    return specs


FOREIGN_DOMAIN = "sql"
"""The domain of `foreign_lessons`: not the tasks' own (python)."""


def foreign_lessons() -> list[Any]:
    """The rerun lesson in the insight, workflow and reasoningbank formats, learnt in another domain: a pool
    holding them helps only a condition that retrieves across domains."""
    from mtl_graph.memory.formats.reasoningbank import ReasoningBankMemory
    from mtl_graph.memory.formats.workflow import WorkflowMemory

    source = [Provenance(domain=FOREIGN_DOMAIN, source_task_id="sql-past")]
    item = {"title": RERUN.title, "description": RERUN.description, "content": RERUN.content}
    return [RERUN.model_copy(update={"sources": source}),
            WorkflowMemory(goal=RERUN.description, actions=[f"{RERUN.title}.", RERUN.content], sources=source),
            ReasoningBankMemory(query="Fix the SQL query so that the report test passes.", items=[item],
                                sources=source)]


def starting_pool(pool: MemoryPool, sequence: str) -> MemoryPool:
    """The sequence's starting pool. The negative one is a pool in use: the helpful and neutral memories carry
    six earlier credited runs (four passed), and the harmful memory has just arrived with no record."""
    if sequence not in SEQUENCES:
        raise ValueError(f"unknown sequence {sequence!r}; choose one of {', '.join(SEQUENCES)}")
    if sequence == "positive":
        pool.add_many(NEUTRAL)
        return pool
    pool.add_many([HARMFUL, RERUN, *NEUTRAL])
    for run in range(6):
        pool.credit(f"past-{run}", [Use(RERUN.id, True), *(Use(m.id, False) for m in NEUTRAL)],
                    "success" if run % 3 else "failure", "tests")
    return pool


def memories_in(messages: list[BaseMessage]) -> list[tuple[int, str]]:
    """(number, text) of every memory in the system prompt's memory block, lower-cased."""
    system = next((m.content for m in messages if isinstance(m, SystemMessage)), "")
    found: list[tuple[int, list[str]]] = []
    for line in str(system).splitlines():
        head = re.match(r"Memory (\d+) \(", line)
        if head:
            found.append((int(head.group(1)), []))
        elif found and line.startswith("│"):
            found[-1][1].append(line[1:].strip().lower())
    return [(n, " ".join(text)) for n, text in found]


class MemoryFollower(ScriptedChatModel):
    """The scripted agent of one task: plans, acts and distils according to the memories its prompt holds."""

    spec: Any = None
    """The TaskSpec it works on."""
    followed: Any = None
    """The memory it followed this run (number, text), once its first action is chosen."""
    verify: bool | None = None

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        text = " ".join(str(m.content) for m in messages)
        if "write a short plan" in text:
            reply: AIMessage = AIMessage(f"Plan: {PLAN}")
        elif "into memories for OTHER agents" in text:
            reply = self._distil("Outcome: success" in text, text)
        else:
            reply = self._act(messages)
        # Usage as a provider reports it (about four characters a token), so cost accounting has tokens to count.
        out = len(str(reply.content)) + len(json.dumps([c["args"] for c in reply.tool_calls]))
        usage = {"input_tokens": len(text) // 4, "output_tokens": max(1, out // 4)}
        reply = reply.model_copy(update={"usage_metadata": {**usage, "total_tokens": sum(usage.values())}})
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _choose(self, messages: list[BaseMessage]) -> str:
        shown = memories_in(messages)
        harmful = next((m for m in shown if HARMFUL_MARK in m[1]), None)
        helpful = next((m for m in shown if HELPFUL_MARK in m[1]), None)
        self.followed = harmful or helpful
        self.verify = harmful is None if self.followed else self.spec.verifies_alone
        if harmful:
            return f"Using Memory {harmful[0]}: the fix compiles, so I submit without running the check."
        if helpful:
            return f"Using Memory {helpful[0]}: I will run the check after the edit."
        return "I fix the operator first."

    def _act(self, messages: list[BaseMessage]) -> AIMessage:
        steps = sum(isinstance(m, AIMessage) for m in messages)
        spec = self.spec
        if steps == 0:
            return bash_call(spec.first_fix, thought=self._choose(messages))
        if not self.verify:
            return submit_call("fixed the operator")
        last = next((str(m.content) for m in reversed(messages) if isinstance(m, ToolMessage)), "")
        if steps == 1 or (steps == 3 and spec.second_fix):
            return bash_call(spec.task.check or "true", thought="Running the check.")
        if steps == 2 and "AssertionError" in last and spec.second_fix:
            return bash_call(spec.second_fix, thought="The check shows a second bug: the scale factor.")
        return submit_call("fixed and checked")

    def _distil(self, passed: bool, prompt: str = "") -> AIMessage:
        """The lesson as the format asked for it: an insight, a workflow or ReasoningBank items."""
        if self.followed is not None:  # what it followed, restated: the loop credits that memory
            memory = HARMFUL if HARMFUL_MARK in self.followed[1] else RERUN
        else:
            memory = RERUN if passed and self.verify else LEARNT_FAILURE
        item = {"title": memory.title, "description": memory.description, "content": memory.content}
        if "memory items" in prompt:
            answer: dict[str, Any] = {"items": [item]}
        elif "WORKFLOW" in prompt or "workflow to avoid" in prompt:
            answer = {"goal": memory.description, "actions": [f"{memory.title}.", memory.content]}
        else:
            answer = item
        return AIMessage(json.dumps(answer))


def agent_for(spec: TaskSpec) -> MemoryFollower:
    """A fresh scripted agent for one task."""
    return MemoryFollower(responses=[], spec=spec)
