"""`mtl eval --suites list`, and the new suites' bad paths through the command line (one error line each)."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from mtl_graph.cli.evaluation import eval_cmd
from mtl_graph.bench.suites import SUITE_INFO, SUITES
from helpers.paths import FIXTURES


@pytest.fixture
def cli():
    app = typer.Typer()
    app.command("eval")(eval_cmd)
    app.command("other")(lambda: None)  # two commands, so `eval` stays a subcommand
    return lambda *args: CliRunner().invoke(app, [str(a) for a in args])


def test_list_names_every_suite_with_what_it_needs(cli):
    result = cli("eval", "--suites", "list")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["suite", "needs"] and len(lines) == 1 + len(SUITES) == 1 + len(SUITE_INFO)
    for name, (spec, needs) in SUITE_INFO.items():
        assert spec.startswith(name) and any(line.startswith(spec) and line.endswith(needs) for line in lines)


def test_running_still_needs_an_out_directory(cli):
    result = cli("eval", "--suites", "humaneval", "--agent", "oracle")
    assert result.exit_code == 2 and "--out is required" in result.output


@pytest.mark.parametrize("spec, message", [
    ("livecodebench:/nonexistent/test6.jsonl", "livecodebench data not found"),
    ("terminalbench:/nonexistent", "terminalbench directory not found"),
    ("replicationbench:/nonexistent", "not a ReplicationBench dataset"),
    ("mlgym:/nonexistent", "not an MLGym checkout"),
    ("mlgym", "suite 'mlgym' needs a path"),
])
def test_a_bad_path_is_one_error_line(cli, tmp_path, spec, message):
    result = cli("eval", "--suites", spec, "--agent", "noop", "--out", tmp_path / "o", "--no-progress")
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_an_eval_over_every_new_suite_reports_runs_and_skips(cli, tmp_path):
    specs = ",".join([f"livecodebench:{FIXTURES / 'livecodebench'}",
                      f"replicationbench:{FIXTURES / 'replicationbench'}", f"mlgym:{FIXTURES / 'mlgym'}"])
    result = cli("eval", "--suites", specs, "--agent", "noop", "--formats", "none", "--out", tmp_path / "o",
                 "--no-progress", "--sandbox", "local")
    assert result.exit_code == 0, result.output
    report = (tmp_path / "o" / "report.md").read_text()
    assert "8 runs" in result.output and "needs Python packages mtl_fixture_maze_env" in report
