"""Re-retrieval when a test run fails mid-task: memories matched to the error, not only to the task."""

from __future__ import annotations

import re
from typing import Any

from mtl_graph.core.trajectory import Step
from mtl_graph.pipeline import events
from mtl_graph.config import MTLConfig
from mtl_graph.pipeline.prompting import prompt
from mtl_graph.pipeline.retrieval import retrieve_for, retrieved_record
from mtl_graph.memory.fence import fence_memories
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task

# Commands that run a test suite, in the usual ecosystems.
TEST_COMMAND = re.compile(
    r"\b(pytest|unittest|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest)\b"
    r"|\b(go|cargo|npm|yarn|pnpm|mvn|gradle|make|dotnet|mix|swift)\s+test\b"
    r"|\btest_\w+\.py\b|\b\w+_test\.(py|go)\b"
)


class MemoryRefresh:
    """After the first failing test command, retrieve once more with the failure as query (`RunSteps` calls it).

    The new memories reach the model with that command's observation, under a header that keeps them advice."""

    def __init__(self, pool: MemoryPool, cfg: MTLConfig, task: Task, already: list[str]) -> None:
        self.pool, self.cfg, self.task, self.already = pool, cfg, task, set(already)
        self.used = False
        self.hits: list[dict[str, Any]] = []

    def __call__(self, step: Step) -> str | None:
        if self.used or step.tool != "bash" or not step.exit_code or not TEST_COMMAND.search(step.action):
            return None
        self.used = True
        query = f"{self.task.instruction[:1500]}\n\nA test run failed with:\n{step.observation[-1000:]}"
        try:
            fresh = retrieve_for(self.pool, self.task, self.cfg, query, self.cfg.retrieval.top_k,
                                 exclude_ids=self.already).hits
        except Exception as exc:  # a refresh is a bonus: never let it end the run
            events.warning(f"re-retrieval failed: {exc}")
            return None
        if not fresh:
            return None
        self.hits = [retrieved_record(h) for h in fresh]
        events.retrieved(self.hits, refresh=True)
        fenced = fence_memories([h.memory for h in fresh], start=len(self.already) + 1,
                                observation_chars=self.cfg.retrieval.observation_chars)
        return prompt("memory_refresh", memories=fenced.text, boundary=fenced.boundary)
