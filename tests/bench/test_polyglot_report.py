"""The eval report on exercism runs: per-language columns, empty pools, honest hold-one-out claims; and the
configuration a results directory is fixed with."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtl_graph.bench.harness import run_eval
from mtl_graph.bench.records import Condition, EvalConfig, MemoryRef, Pool, TaskResult
from mtl_graph.bench.report import build_report, render_markdown, render_report
from mtl_graph.bench.runners import OracleRunner, ScriptedRunner
from mtl_graph.bench.results import CONFIG_FILE, StoreError
from mtl_graph.bench.suites import SuiteError
from mtl_graph.core.trajectory import Verdict, VerdictStatus
from mtl_graph.memory.base import MemoryType
from helpers.paths import FIXTURES

POLYGLOT = FIXTURES / "polyglot"
PYTHON_ONLY = f"exercism:{POLYGLOT}?languages=python"
INSIGHT = MemoryType.INSIGHT


def _config(**kw) -> EvalConfig:
    return EvalConfig(**{"suites": [PYTHON_ONLY], "runner": "oracle", "formats": [INSIGHT], **kw})


def _report(out: Path) -> str:
    render_report(out)
    return (out / "report.md").read_text()


def test_offline_agent_report_says_phase_3_had_no_memories(tmp_path):
    summary = run_eval(_config(), OracleRunner(sandbox="local"), str(tmp_path), progress=False)
    assert summary.pool_size == 0 and summary.errors == 0
    md = _report(tmp_path)
    insight_row = next(line for line in md.splitlines() if line.startswith("| insight |"))
    assert "no memories" in insight_row and "+0.000" not in insight_row
    assert "Phase 3 ran with the offline agent `oracle` with an empty pool (no distiller given: empty pool)" in md
    assert "hold-one-out holds" not in md
    assert "| insight | 0 | 1 | 0 | 0 |" in md  # pool memories, runs, runs with memories, memories retrieved


def _pool_of(*domains: str) -> Pool:
    return Pool(memories=[MemoryRef(id=f"m-{d}", type=INSIGHT, domains=[d], source_task_ids=[f"{d}/t"])
                          for d in domains])


def test_single_suite_holdout_that_retrieves_nothing_is_warned_about(tmp_path):
    pool = _pool_of("exercism")
    runner = ScriptedRunner(solved=[], pool=pool, sandbox="local")
    run_eval(_config(runner="scripted"), runner, str(tmp_path), distill=lambda results: pool, progress=False)
    md = _report(tmp_path)
    assert "**Warning:** hold-one-out with a single suite (`exercism`)" in md
    assert "Phase 3 retrieved no memory, so hold-one-out was not exercised." in md
    assert "hold-one-out holds" not in md


def test_hold_one_out_is_claimed_when_memories_were_retrieved(tmp_path):
    pool = _pool_of("humaneval", "exercism")
    runner = ScriptedRunner(solved=[], pool=pool, sandbox="local")
    run_eval(_config(runner="scripted"), runner, str(tmp_path), distill=lambda results: pool, progress=False)
    md = _report(tmp_path)
    assert "No run retrieved a memory outside its scope (hold-one-out holds over 1 retrieved memories)." in md
    assert "| insight | 2 | 1 | 1 | 1 |" in md and "Warning" not in md


def _result(task: str, lang_pass: bool, cond: Condition = Condition()) -> TaskResult:
    status = VerdictStatus.PASS if lang_pass else VerdictStatus.FAIL
    return TaskResult(suite="exercism", task_id=task, domain="exercism", condition=cond, attempt=0,
                      verdict=Verdict(status=status, source="tests"))


def test_one_column_per_language_and_the_average_over_suites_only():
    results = [_result("exercism/python/a", True), _result("exercism/python/b", True),
               _result("exercism/rust/a", False), _result("humaneval/0", True)]
    results[-1] = results[-1].model_copy(update={"suite": "humaneval", "domain": "humaneval"})
    info = [{"name": "exercism", "spec": "exercism:x", "groups": {
        "exercism/python/a": "python", "exercism/python/b": "python", "exercism/rust/a": "rust"}},
        {"name": "humaneval", "spec": "humaneval"}]
    data = build_report(results, EvalConfig(suites=["exercism:x", "humaneval"], runner="oracle", formats=[]), info)
    assert data["columns"] == ["exercism", "exercism/python", "exercism/rust", "humaneval"]
    row = data["table"]["zero_shot"]
    assert [row[c]["pass_at_k"] for c in data["columns"]] == pytest.approx([2 / 3, 1.0, 0.0, 1.0])
    assert row["average"]["pass_at_k"] == pytest.approx((2 / 3 + 1.0) / 2)
    md = render_markdown(data, [])
    assert "| condition | exercism | exercism/python | exercism/rust | humaneval | avg |" in md
    assert "Phase 3 did not run" in md


def test_configuration_is_fixed_only_after_the_suites_load(tmp_path, monkeypatch):
    out = tmp_path / "results"
    with pytest.raises(SuiteError, match="not found"):
        run_eval(_config(suites=["exercism:/no/such/dir"]), OracleRunner(sandbox="local"), str(out), progress=False)
    assert not (out / CONFIG_FILE).exists()  # the typo left nothing that would refuse the corrected command
    monkeypatch.chdir(POLYGLOT.parent)
    relative = _config(suites=["exercism:polyglot?languages=python"], formats=[])
    first = run_eval(relative, OracleRunner(sandbox="local"), str(out), progress=False)
    assert first.ran["phase 1: zero-shot"] == 1
    again = run_eval(_config(suites=[f"exercism:{POLYGLOT}?languages=python"], formats=[]),
                     OracleRunner(sandbox="local"), str(out), progress=False)
    assert again.resumed["phase 1: zero-shot"] == 1 and again.ran["phase 1: zero-shot"] == 0
    with pytest.raises(StoreError, match="different configuration"):
        run_eval(_config(suites=[f"exercism:{POLYGLOT}?languages=python+rust"], formats=[]),
                 OracleRunner(sandbox="local"), str(out), progress=False)


def test_cli_languages_option_filters_exercism_and_is_part_of_the_configuration(tmp_path):
    import json

    import typer
    from typer.testing import CliRunner

    from mtl_graph.cli.evaluation import eval_cmd

    app = typer.Typer()
    app.command("eval")(eval_cmd)
    app.command("other")(lambda: None)

    def cli(*args):
        return CliRunner().invoke(app, ["eval", *map(str, args)])

    out = tmp_path / "run"
    ok = cli("--suites", f"exercism:{POLYGLOT}", "--languages", "python", "--agent", "noop", "--formats", "none",
             "--sandbox", "local", "--out", out, "--no-progress")
    assert ok.exit_code == 0, ok.output
    assert json.loads((out / CONFIG_FILE).read_text())["suites"] == [f"exercism:{POLYGLOT.resolve()}?languages=python"]
    assert "| zero_shot | 0.000 | 0.000 | 0.000 |" in (out / "report.md").read_text()
    bad = cli("--suites", "humaneval", "--languages", "python", "--agent", "noop", "--out", tmp_path / "x")
    assert bad.exit_code == 2 and "error: --languages applies to exercism suites" in bad.output
    assert not (tmp_path / "x").exists()
    empty = cli("--suites", f"exercism:{POLYGLOT}?languages=python", "--agent", "oracle", "--formats", "insight",
                "--sandbox", "local", "--out", tmp_path / "y", "--no-progress")
    assert empty.exit_code == 0
    assert "note: phase 3 ran with an empty pool, so no memory was retrieved (offline agent oracle" in empty.output
