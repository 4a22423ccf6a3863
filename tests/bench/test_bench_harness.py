"""The protocol with runners whose results are known: oracle, no-op, scripted; scopes; resume; refusal."""

from __future__ import annotations

import json

import pytest

from mtl_graph.bench.harness import Harness, build_scope, run_eval
from mtl_graph.bench.records import Condition, EvalConfig, MemoryRef, MemoryScope, Pool, RetrievedMemory, RunOutcome
from mtl_graph.bench.passk import aggregate
from mtl_graph.bench.runners import NoopRunner, OracleRunner, ScriptedRunner, eligible
from mtl_graph.bench.results import RESULTS_FILE, ResultStore, StoreError
from mtl_graph.bench.suites import load_suite
from mtl_graph.memory.base import MemoryType
from mtl_graph.core.task import Task
from helpers import paths

FIXTURES = paths.FIXTURES / "bench"
PROBLEMS = f"jsonl:{FIXTURES / 'problems.jsonl'}"
TASKS = f"dir:{FIXTURES / 'tasks'}"
DOMAINS = ["humaneval", "problems", "tasks", "shell"]


def _pool() -> Pool:
    """Two memories per format and domain, each distilled from a task of that domain."""
    return Pool(memories=[
        MemoryRef(id=f"{fmt.value}-{d}-{i}", type=fmt, domains=[d], source_task_ids=[f"{d}-src-{i}"],
                  task_models=["model-a" if i == 0 else "model-b"])
        for fmt in MemoryType for d in DOMAINS for i in range(2)])


def _scores(out, k=1):
    return {cell: round(s.pass_at_k, 6) for cell, s in aggregate(ResultStore(out).results(), k).items()}


def test_oracle_on_humaneval_sample_is_perfect(tmp_path):
    cfg = EvalConfig(suites=["humaneval"], runner="oracle", limit=20, formats=[])
    summary = run_eval(cfg, OracleRunner(), str(tmp_path), concurrency=2, progress=False)
    assert summary.ran == {"phase 1: zero-shot": 20} and summary.errors == 0
    assert _scores(tmp_path) == {("humaneval", "zero_shot"): 1.0, ("average", "zero_shot"): 1.0}


def test_noop_on_humaneval_sample_is_zero(tmp_path):
    cfg = EvalConfig(suites=["humaneval"], runner="noop", limit=20, formats=[])
    run_eval(cfg, NoopRunner(), str(tmp_path), concurrency=2, progress=False)
    assert _scores(tmp_path) == {("humaneval", "zero_shot"): 0.0, ("average", "zero_shot"): 0.0}


def test_scripted_subset_gives_the_exact_table(tmp_path):
    he = [t.id for t in load_suite("humaneval", limit=4).tasks]
    solved = {"zero_shot": [he[0], "problems/mean", "fix-median"],
              "insight": [he[0], he[1], "problems/mean", "problems/two-sum", "fix-median", "greeting"],
              "trajectory": ["problems/mean"]}
    cfg = EvalConfig(suites=["humaneval", PROBLEMS, TASKS], runner="scripted", limit=4,
                     formats=[MemoryType.TRAJECTORY, MemoryType.INSIGHT])
    seen = []
    summary = run_eval(cfg, ScriptedRunner(solved, pool=_pool()), str(tmp_path),
                       distill=lambda rs: seen.extend(rs) or _pool(), concurrency=2, progress=False)
    assert summary.leaks == 0 and summary.pool_size == len(_pool().memories)
    assert len(seen) == 4 + 3 + 2 and all(r.condition.is_zero_shot and r.trajectory for r in seen)
    expected = {
        ("humaneval", "zero_shot"): 0.25, ("problems", "zero_shot"): 1 / 3, ("tasks", "zero_shot"): 0.5,
        ("humaneval", "insight"): 0.5, ("problems", "insight"): 2 / 3, ("tasks", "insight"): 1.0,
        ("humaneval", "trajectory"): 0.0, ("problems", "trajectory"): 1 / 3, ("tasks", "trajectory"): 0.0,
        ("average", "zero_shot"): (0.25 + 1 / 3 + 0.5) / 3, ("average", "insight"): (0.5 + 2 / 3 + 1) / 3,
        ("average", "trajectory"): (1 / 3) / 3,
    }
    assert _scores(tmp_path) == {cell: round(v, 6) for cell, v in expected.items()}


class _RetrieveOnly(ScriptedRunner):
    """Retrieves like the scripted runner but skips the checks: provenance is all this test looks at."""

    def run(self, task, condition, attempt, scope):
        return RunOutcome(retrieved=self.retrieve(scope))


def test_hold_one_out_never_retrieves_a_same_domain_memory(tmp_path):
    cfg = EvalConfig(suites=["humaneval", PROBLEMS, TASKS], runner="scripted", limit=3,
                     formats=list(MemoryType), pool_fractions=[0.5], source_domain_counts=[1])
    summary = run_eval(cfg, _RetrieveOnly([], pool=_pool()), str(tmp_path), distill=lambda rs: _pool(),
                       progress=False)
    results = [r for r in ResultStore(tmp_path).results() if not r.condition.is_zero_shot]
    assert summary.leaks == 0 and results
    for r in results:
        assert r.retrieved, r.key
        for m in r.retrieved:
            assert r.domain not in m.domains and r.task_id not in m.source_task_ids
            assert m.type == r.condition.memory_format.value
        if r.condition.source_domains == 1:
            assert len({d for m in r.retrieved for d in m.domains}) == 1


class _LeakyRunner:
    """Retrieves a memory of the task's own domain whatever the scope says."""

    name = "leaky"

    def run(self, task, condition, attempt, scope):
        leak = RetrievedMemory(id="same-domain", type=scope.memory_type.value if scope else "", domains=[task.domain])
        return RunOutcome(retrieved=[leak] if scope else [])


def test_a_leak_is_detected_and_recorded(tmp_path):
    cfg = EvalConfig(suites=[TASKS], runner="leaky", formats=[MemoryType.INSIGHT])
    summary = run_eval(cfg, _LeakyRunner(), str(tmp_path), progress=False)
    assert summary.leaks == 2
    leaked = [r for r in ResultStore(tmp_path).results() if r.leaked_memory_ids]
    assert {r.condition.key for r in leaked} == {"insight"}
    assert all(r.leaked_memory_ids == ["same-domain"] for r in leaked)


def test_scopes_nest_pool_fractions_and_filter_by_model():
    cfg = EvalConfig(suites=["humaneval"], runner="x", seed=3)
    task, pool = Task(id="t", instruction="x", domain="humaneval"), _pool()
    subsets = [set(build_scope(task, Condition(memory_format=MemoryType.INSIGHT, pool_fraction=f), pool, cfg)
                   .only_ids) for f in (0.25, 0.5, 0.75)]
    assert [len(s) for s in subsets] == [2, 4, 6] and subsets[0] < subsets[1] < subsets[2]
    full = build_scope(task, Condition(memory_format=MemoryType.INSIGHT), pool, cfg)
    assert full.only_ids is None and full.exclude_domains == ["humaneval"] and full.exclude_task_ids == ["t"]
    by_model = build_scope(task, Condition(memory_format=MemoryType.INSIGHT, source_model="model-a"), pool, cfg)
    ids = eligible(pool, by_model)
    assert len(ids) == 3 and all(i.endswith("-0") and "humaneval" not in i for i in ids)
    assert build_scope(task, Condition(), pool, cfg) is None
    no_holdout = MemoryScope(memory_type=MemoryType.INSIGHT)
    assert any("humaneval" in i for i in eligible(pool, no_holdout))


def test_resume_after_an_interrupted_run(tmp_path):
    cfg = EvalConfig(suites=[PROBLEMS, TASKS], runner="oracle", formats=[MemoryType.SUMMARY], k=1, samples=2)
    first = run_eval(cfg, OracleRunner(), str(tmp_path), concurrency=2, progress=False)
    assert first.ran == {"phase 1: zero-shot": 10, "phase 3: memory transfer": 10}
    results = tmp_path / RESULTS_FILE
    lines = results.read_text().splitlines(keepends=True)
    # Keep 13 complete results and half of the 14th: what a kill in the middle of a write leaves.
    results.write_text("".join(lines[:13]) + lines[13][: len(lines[13]) // 2])
    second = run_eval(cfg, OracleRunner(), str(tmp_path), progress=False)
    assert second.resumed == {"phase 1: zero-shot": 10, "phase 3: memory transfer": 3}
    assert second.ran == {"phase 1: zero-shot": 0, "phase 3: memory transfer": 7}
    store = ResultStore(tmp_path)
    assert len(store.results()) == 20 and store.skipped_lines == 0
    assert all(json.loads(line) for line in results.read_text().splitlines())
    third = run_eval(cfg, OracleRunner(), str(tmp_path), progress=False)
    assert sum(third.ran.values()) == 0


class _FlakyRunner:
    name = "flaky"

    def __init__(self):
        self.calls = 0

    def run(self, task, condition, attempt, scope):
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("model endpoint went away")
        return OracleRunner().run(task, condition, attempt, scope)


def test_errored_runs_are_recorded_and_retried(tmp_path):
    cfg = EvalConfig(suites=[TASKS], runner="flaky", formats=[])
    flaky = _FlakyRunner()
    first = Harness(cfg, flaky, ResultStore(tmp_path, cfg), progress=False).run()
    assert first.errors == 1
    errored = [r for r in ResultStore(tmp_path).results() if r.error]
    assert "ConnectionError: model endpoint went away" in errored[0].error and not errored[0].passed
    second = Harness(cfg, flaky, ResultStore(tmp_path, cfg), progress=False).run()
    assert second.ran == {"phase 1: zero-shot": 1} and second.errors == 0
    assert all(r.passed for r in ResultStore(tmp_path).results())


def test_a_results_dir_of_another_configuration_is_refused(tmp_path):
    cfg = EvalConfig(suites=[TASKS], runner="oracle", formats=[], k=1)
    run_eval(cfg, OracleRunner(), str(tmp_path), progress=False)
    other = cfg.model_copy(update={"k": 3})
    with pytest.raises(StoreError, match=r"different configuration.*k: 1 \(stored\) vs 3 \(now\)"):
        ResultStore(tmp_path, other)
    # Prices only change accounting, so they may differ on resume.
    ResultStore(tmp_path, cfg.model_copy(update={"price_input_per_mtok": 2.5}))


def test_results_without_config_are_refused(tmp_path):
    (tmp_path / RESULTS_FILE).write_text("{}\n")
    with pytest.raises(StoreError, match="no config.json"):
        ResultStore(tmp_path, EvalConfig(suites=[TASKS], runner="oracle"))


def test_two_suites_with_one_name_are_refused(tmp_path):
    from mtl_graph.bench.suites import SuiteError

    cfg = EvalConfig(suites=[TASKS, TASKS], runner="oracle", formats=[])
    with pytest.raises(SuiteError, match="share the name tasks"):
        run_eval(cfg, OracleRunner(), str(tmp_path), progress=False)


def test_config_validation():
    with pytest.raises(ValueError, match="samples"):
        EvalConfig(suites=["humaneval"], runner="x", k=3, samples=2)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        EvalConfig(suites=["humaneval"], runner="x", pool_fractions=[1.0])
    keys = [c.key for c in EvalConfig(suites=["humaneval"], runner="x", formats=[MemoryType.INSIGHT],
                                      pool_fractions=[0.5, 0.25], source_domain_counts=[2],
                                      source_model="m").conditions()]
    assert keys == ["zero_shot", "insight@from=m", "insight@pool=0.25@from=m", "insight@pool=0.5@from=m",
                    "insight@domains=2@from=m"]


def test_outcome_from_a_graph_final_state():
    from mtl_graph.bench.runners import outcome_from_state
    from mtl_graph.core.trajectory import TokenUsage, Trajectory, Verdict, VerdictStatus
    from mtl_graph.core.task import TaskRef

    verdict = Verdict(status=VerdictStatus.PASS, source="tests")
    traj = Trajectory(task=TaskRef(id="t"), verdict=verdict, tokens=TokenUsage(input=7, output=3))
    # What a LangGraph server returns: plain JSON.
    state = {"verdict": verdict.model_dump(mode="json"), "trajectory": traj.model_dump(mode="json"),
             "retrieved": [{"id": "m1", "score": 0.8, "type": "insight", "domains": ["x"], "source_task_ids": ["s"]}],
             "new_memory_ids": ["n1"]}
    outcome = outcome_from_state(state)
    assert outcome.passed and outcome.tokens == TokenUsage(input=7, output=3)
    assert outcome.retrieved[0].domains == ["x"] and outcome.new_memory_ids == ["n1"]
    assert outcome_from_state({"trajectory": traj}).verdict == verdict


def test_phase_two_waits_until_every_zero_shot_run_finished(tmp_path):
    cfg = EvalConfig(suites=[TASKS], runner="flaky", formats=[MemoryType.TRAJECTORY])
    flaky, distilled = _FlakyRunner(), []
    distill = lambda rs: distilled.append(len(rs)) or Pool(note="test")  # noqa: E731
    first = Harness(cfg, flaky, ResultStore(tmp_path, cfg), distill, progress=False).run()
    assert first.errors == 1 and "1 zero-shot run(s) ended with an error" in first.stopped
    assert distilled == [] and ResultStore(tmp_path).load_pool() is None
    second = Harness(cfg, flaky, ResultStore(tmp_path, cfg), distill, progress=False).run()
    assert second.stopped is None and distilled == [2] and "phase 3: memory transfer" in second.ran
