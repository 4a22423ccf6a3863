"""The live tier: the whole pipeline against a real local model server (opt-in: `make test-live`).

A 270M base model writes junk: these tests check that every prompt path runs against a real server with no
traceback, that junk never reaches the pool, and that the run is recorded — never that the model is good."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from mtl_graph.live import LiveServerError, LocalModelServer
from helpers.paths import EXAMPLES

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    from mtl_graph.live import LiveServerConfig

    log = tmp_path_factory.mktemp("live") / "server.log"
    try:
        with LocalModelServer(LiveServerConfig(log_file=log, max_answer_tokens=192)) as running:
            yield running
    except LiveServerError as exc:
        pytest.skip(str(exc))


def options(server: LocalModelServer) -> dict:
    return {"base_url": server.base_url, "max_tokens": 192, "timeout": 900, "max_retries": 0}


@pytest.mark.parametrize("action_format", ["tool_calls", "text"])
def test_a_task_through_the_graph(server: LocalModelServer, action_format: str, tmp_path: Path) -> None:
    from mtl_graph.agent import AgentConfig, DefaultAgent
    from mtl_graph.distill.quality import junk_reasons
    from mtl_graph.pipeline import build_mtl_graph
    from mtl_graph.memory.pool.pool import MemoryPool
    from mtl_graph.core.task import Task

    from mtl_graph.cli.progress import stream_run

    events: list[dict] = []
    with MemoryPool.open(":memory:") as pool:
        graph = build_mtl_graph(server.model, pool, memory_type="insight", sandbox="auto",
                                agent=DefaultAgent(AgentConfig(action_format=action_format, step_limit=2)),
                                model_options=options(server), run_log=tmp_path / "runs.jsonl")
        state = stream_run(graph, {"task": Task.from_dir(EXAMPLES / "primes")}, events.append)
        stored = [pool.get(i) for i in state.get("new_memory_ids", [])]
    assert set(state["timings"]) >= {"plan", "retrieve", "execute", "judge", "distill", "write_back"}
    agent = next(e for e in events if e["kind"] == "agent")
    assert agent["exit_status"] in {"submitted", "step_limit", "format_errors", "time_limit"}, agent["error"]
    assert state["trajectory"]["model"] == "gemma"
    assert (tmp_path / "runs.jsonl").read_text().count('"record": "run"') == 1
    for failure in state.get("distill_failures", []):
        assert ": " in failure and "DistillFailure(" not in failure  # one readable line per format
    for memory in stored:  # whatever passed the gate is not junk by its own rules
        assert memory is not None
        assert junk_reasons(f"{memory.key_text()} {getattr(memory, 'content', '')}") == []


def test_the_llm_judge_answers_with_a_verdict(server: LocalModelServer) -> None:
    from mtl_graph.llm.chat import chat_model
    from mtl_graph.judging.judges import LLMJudge
    from mtl_graph.core.trajectory import Step, Trajectory
    from mtl_graph.core.task import TaskRef

    run = Trajectory(task=TaskRef(id="t", instruction="Print hello."),
                     steps=[Step(action="echo hello", observation="hello", exit_code=0)], submission="done")
    verdict = LLMJudge(chat_model(server.model, options(server))).judge(run)
    assert verdict.status.value in {"pass", "fail", "uncertain"} and verdict.source == "judge"
