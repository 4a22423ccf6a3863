"""The learning condition through the real graph: a harmful memory is served forever by the frozen pool and
quarantined by the loop after its cited failures; a lesson distilled online lifts the rest of the sequence."""

import json

import pytest

from mtl_graph.bench import learning_sequences as ls
from mtl_graph.bench.learning import run_sequence, scripted, write_report
from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.pool.pool import MemoryPool

MIN_CITED = 3


def _factory(tmp_path, embeddings, sequence):
    made = iter(range(100))
    return lambda: ls.starting_pool(MemoryPool.open(tmp_path / f"pool-{next(made)}", embeddings), sequence)


def test_the_loop_quarantines_the_harmful_memory_after_its_cited_failures_and_the_rest_passes_more(
        tmp_path, embeddings):
    specs = ls.make_tasks(9, prefix="neg")
    # The first three tasks all have the second bug, so following the harmful memory fails each of them.
    specs = [s for s in specs if s.second_fix][:MIN_CITED] + [s for s in specs if not s.second_fix] + \
        [s for s in specs if s.second_fix][MIN_CITED:]
    by_id = {s.task.id: s for s in specs}
    result = run_sequence([s.task for s in specs], _factory(tmp_path, embeddings, "negative"),
                          lambda task: ls.agent_for(by_id[task.id]), sequence="negative", watched=ls.HARMFUL.id,
                          sandbox="local", lifecycle=LifecycleConfig(quarantine_min_cited=MIN_CITED))
    static, learning = result.conditions["static"], result.conditions["learning"]
    assert all(r.watched_injected for r in static.runs) and static.stopped_serving() is None
    assert all(r.cited == [] for r in static.runs)  # the frozen pool is never credited
    assert [r.passed for r in static.runs] == [s.second_fix is None for s in specs]  # only the hasty-proof pass
    first = learning.runs[:MIN_CITED]
    assert all(r.watched_injected and ls.HARMFUL.id in r.cited and not r.passed for r in first)
    assert [bool(r.quarantined) for r in learning.runs] == [i == MIN_CITED - 1 for i in range(len(specs))]
    assert learning.runs[MIN_CITED - 1].quarantined == [ls.HARMFUL.id]
    assert learning.stopped_serving() == MIN_CITED
    assert not any(r.watched_injected for r in learning.runs[MIN_CITED:])
    assert learning.pass_rate_after(MIN_CITED) == 1.0 > static.pass_rate_after(MIN_CITED)
    summary = result.summary()
    assert summary["learning"]["quarantined"] == [ls.HARMFUL.id] and summary["learning"]["stopped_serving"] == 3
    assert summary["static"]["stopped_serving"] is None and summary["static"]["quarantined"] == []


def test_a_lesson_distilled_online_lifts_the_positive_sequence(tmp_path, embeddings):
    result = scripted("positive", 6, embeddings=embeddings, sandbox="local", root=tmp_path,
                      run_log=tmp_path / "runs.jsonl")
    static, learning = result.conditions["static"], result.conditions["learning"]
    assert static.pool_size_end == len(ls.NEUTRAL) and all(r.cited == [] for r in static.runs)
    assert learning.pass_rate > static.pass_rate
    learnt = next(i for i, r in enumerate(learning.runs) if r.passed)
    later = learning.runs[learnt + 1:]
    assert later and all(r.passed and r.cited for r in later)  # every later run follows the learnt lesson
    assert learning.pool_size_end == len(ls.NEUTRAL) + 1
    paths = write_report([result], tmp_path / "out")
    assert paths["png"].stat().st_size > 1000
    assert "| positive | 6 |" in paths["md"].read_text()
    data = json.loads(paths["json"].read_text())
    assert data[0]["learning"]["pass_rate"] == pytest.approx(learning.pass_rate, abs=1e-4)
    # the cost beside the pass rate: the learning pool distils every run (a plan and a distil call each); the
    # frozen one only plans
    assert data[0]["static"]["extra_per_run"]["calls"] == 1 and data[0]["learning"]["extra_per_run"]["calls"] == 2


def test_the_scripted_agent_reads_its_prompts_memory_block():
    from langchain_core.messages import HumanMessage, SystemMessage

    from mtl_graph.pipeline.prompting import memory_block

    block = memory_block([ls.NEUTRAL[0], ls.RERUN, ls.HARMFUL])
    messages = [SystemMessage(f"You are an agent.\n\n{block}"), HumanMessage("task")]
    shown = ls.memories_in(messages)
    assert [n for n, _ in shown] == [1, 2, 3]
    spec = ls.make_tasks(1)[0]
    reply = ls.agent_for(spec).invoke(messages)
    assert reply.content.startswith("Using Memory 3") and reply.tool_calls[0]["args"]["command"] == spec.first_fix
    alone = ls.agent_for(spec).invoke([SystemMessage("You are an agent."), HumanMessage("task")])
    assert "memory" not in alone.content.lower()


def test_bad_inputs_fail_with_one_clear_error(tmp_path, embeddings):
    with pytest.raises(ValueError, match="at least one task"):
        run_sequence([], _factory(tmp_path, embeddings, "positive"), ls.agent_for)
    with pytest.raises(ValueError, match="unknown condition 'frozen'"):
        run_sequence([ls.make_tasks(1)[0].task], _factory(tmp_path, embeddings, "positive"), ls.agent_for,
                     condition="frozen")
    with pytest.raises(ValueError, match="1 to 40 tasks"):
        ls.make_tasks(0)
    with pytest.raises(ValueError, match="unknown sequence 'neutral'"):
        scripted("neutral", 3)
    with pytest.raises(ValueError, match="unknown sequence"):
        ls.starting_pool(MemoryPool.open(":memory:", embeddings), "neutral")
    from typer.testing import CliRunner

    from mtl_graph.cli import app

    result = CliRunner().invoke(app, ["eval-learning", "--sequence", "neutral", "--out", str(tmp_path / "cli")])
    assert result.exit_code == 2, result.output
    err = result.stderr.strip().splitlines()
    assert err == ["error: unknown sequence 'neutral'; choose negative, positive or both"]
    assert not (tmp_path / "cli").exists()  # nothing written


def test_mtl_eval_learning_writes_the_report(tmp_path):
    from typer.testing import CliRunner

    from mtl_graph.cli import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["eval-learning", "--sequence", "negative", "--tasks", "3", "--sandbox",
                                      "local", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "| negative | 3 |" in result.output and "static: never (served to the end)" in result.output
    assert {p.name for p in out.iterdir()} == {"learning.json", "learning.md", "learning.png", "runs.jsonl"}
    bad = CliRunner().invoke(app, ["eval-learning", "--sequence", "negative", "--tasks", "41", "--out",
                                   str(tmp_path / "bad")])
    assert bad.exit_code == 2 and not (tmp_path / "bad").exists()
