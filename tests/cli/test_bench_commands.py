"""`mtl eval` / `mtl report` command functions, mounted on a throwaway typer app."""

from __future__ import annotations

import json
import sys

import pytest
import typer
from typer.testing import CliRunner

from mtl_graph.cli.evaluation import eval_cmd, report_cmd
from helpers import paths

FIXTURES = paths.FIXTURES / "bench"
TASKS = f"dir:{FIXTURES / 'tasks'}"
PROBLEMS = f"jsonl:{FIXTURES / 'problems.jsonl'}"


@pytest.fixture
def cli():
    app = typer.Typer()
    app.command("eval")(eval_cmd)
    app.command("report")(report_cmd)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])


def test_eval_oracle_writes_a_report_and_resumes(cli, tmp_path):
    out = tmp_path / "run"
    args = ["eval", "--suites", f"{TASKS},{PROBLEMS}", "--agent", "oracle", "--formats", "insight", "--k", 1,
            "--out", out, "--no-progress", "--concurrency", 2]
    first = cli(*args)
    assert first.exit_code == 0, first.output
    assert "10 runs (0 resumed, 0 errors, 0 provenance violations)" in first.output
    data = json.loads((out / "report.json").read_text())
    assert data["table"]["zero_shot"]["average"]["pass_at_k"] == 1.0
    assert data["table"]["insight"]["average"]["delta"] == 0.0
    again = cli(*args)
    assert again.exit_code == 0 and "0 runs (10 resumed" in again.output
    (out / "report.md").unlink()
    rerender = cli("report", out)
    assert rerender.exit_code == 0 and (out / "report.md").exists()


def test_eval_refuses_a_results_dir_of_another_configuration(cli, tmp_path):
    base = ["eval", "--suites", TASKS, "--agent", "noop", "--formats", "none", "--out", tmp_path, "--no-progress"]
    assert cli(*base).exit_code == 0
    changed = cli(*base, "--seed", 7)
    assert changed.exit_code == 2
    assert "different configuration" in changed.output and "seed: 42 (stored) vs 7 (now)" in changed.output


@pytest.mark.parametrize("args, message", [
    (["--suites", "nosuch", "--agent", "oracle"], "unknown suite 'nosuch'"),
    (["--suites", "jsonl:/nonexistent.jsonl", "--agent", "oracle"], "jsonl file not found"),
    (["--suites", "humaneval", "--model", "openai:gpt-5-mini"], "needs an API key: set the OPENAI_API_KEY"),
    (["--suites", "humaneval", "--agent", "oracle", "--model", "openai:x"], "not both"),
    (["--suites", "humaneval", "--agent", "wizard"], "unknown agent 'wizard'"),
    (["--suites", "humaneval"], "give --model"),
    (["--suites", "humaneval", "--agent", "oracle", "--formats", "poetry"], "unknown memory type 'poetry'"),
    (["--suites", "humaneval", "--agent", "oracle", "--k", 3, "--samples", 2], "samples (2) must be >= k (3)"),
])
def test_eval_bad_input_exits_with_a_clear_message(cli, tmp_path, args, message):
    result = cli("eval", *args, "--out", tmp_path / "o", "--no-progress")
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_report_on_a_missing_dir(cli, tmp_path):
    result = cli("report", tmp_path / "nothing")
    assert result.exit_code == 2 and "not a results directory" in result.output


def test_the_cli_with_every_command_registered_imports_light():
    import subprocess

    # every command is in the app's table from the start: its module, and its work (matplotlib, numpy, rich), load
    # when it runs
    code = ("import sys, mtl_graph.cli; "
            "print(sorted(m for m in ('matplotlib', 'rich', 'numpy', 'langgraph', 'qdrant_client', 'onnxruntime') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
