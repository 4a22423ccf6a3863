"""`mtl ingest` of our own run log tells the truth: repeats within one file, runs already in the pool, and runs an
infrastructure error ended (skipped, not failed) are each named as such, and only bad input exits 1.

The fixture is a real run log: six `mtl run` records on examples/tasks/primes, five by the scripted demo model
(lines 5 and 6 are the same run: same steps, same output) and line 4 by a model whose provider refused the
connection (`error` verdict, exit status model_error, no steps).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mtl_graph.cli.ingest import ingest as ingest_command
from mtl_graph.importers import import_file
from mtl_graph.importers.ingest import IngestConfig, Ledger, ingest
from helpers.fake_models import RoutedChatModel
from mtl_graph.memory.base import MemoryType
from mtl_graph.memory.pool.pool import MemoryPool
from helpers.paths import FIXTURES

RUNLOG = FIXTURES / "runlogs" / "mtl_run.jsonl"
TRAJECTORY = IngestConfig(formats=[MemoryType.TRAJECTORY])
ERROR_LINE = 4


def cli() -> typer.Typer:
    app = typer.Typer()
    app.command()(ingest_command)
    app.command("noop")(lambda: None)  # keeps typer in multi-command mode, as in the real `mtl`
    return app


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli(), ["ingest", *args])
    return result.exit_code, result.output


def row(output: str, name: str) -> int:
    return int(re.search(rf"{name}\s*│\s*(\d+)", output).group(1))


def test_the_run_log_keeps_lines_and_an_error_verdict() -> None:
    result = import_file(RUNLOG)
    assert result.lines == [1, 2, 3, 4, 5, 6] and not result.errors
    statuses = [t.verdict.status.value for t in result.runs]
    assert statuses == ["pass", "pass", "pass", "error", "pass", "pass"]
    assert result.runs[ERROR_LINE - 1].verdict.reason.startswith("model provider error")


def test_a_logged_error_without_a_verdict_gets_the_error_verdict(tmp_path: Path) -> None:
    record = json.loads(RUNLOG.read_text().splitlines()[ERROR_LINE - 1])
    # the shape `mtl run` logs when the workspace could not be made: no verdict, the error says why
    record.update(verdict=None, exit_status=None, error="workspace setup failed:\ncopy refused")
    log = tmp_path / "runs.jsonl"
    log.write_text(json.dumps(record) + "\n")
    [run] = import_file(log).runs
    assert run.verdict.is_error and run.verdict.reason == "workspace setup failed: copy refused"


def test_ingest_twice_counts_repeats_errors_and_the_pool(tmp_path: Path, embeddings) -> None:
    pool = str(tmp_path / "pool")
    code, out = run_cli(str(RUNLOG), "--formats", "trajectory", "--pool", pool)
    assert code == 0, out
    assert (row(out, "log files"), row(out, "runs found"), row(out, "ingested"), row(out, "skipped"),
            row(out, "failed")) == (1, 6, 4, 2, 0), out
    assert "1 run repeats an earlier run of the same file, skipped" in out
    assert "another file" not in out and "failed:" not in out
    assert re.search(rf"1 run skipped, not a fair try: the run ended in an infrastructure error \(model provider "
                     rf"error: OpenAIConnectionError: Connection error\.\): \S+mtl_run\.jsonl:{ERROR_LINE}\n", out), out

    code, again = run_cli(str(RUNLOG), "--formats", "trajectory", "--pool", pool)
    assert code == 0, again
    assert (row(again, "ingested"), row(again, "skipped"), row(again, "failed")) == (0, 6, 0), again
    # every run the ledger has is in the pool, the repeat of line 5 included; the error run is never ingested
    assert "5 runs already in the pool (ingested before), skipped" in again
    assert "repeat" not in again and "1 run skipped, not a fair try" in again
    with MemoryPool.open(pool, embeddings=embeddings) as opened:
        assert opened.count() >= 1


def test_a_copy_in_another_file_is_another_files_run(tmp_path: Path) -> None:
    copy = tmp_path / "copy.jsonl"
    shutil.copy(RUNLOG, copy)
    code, out = run_cli(str(RUNLOG), str(copy), "--dry-run")
    assert code == 0, out
    assert row(out, "log files") == 2 and row(out, "planned") == 4
    assert "1 run repeats an earlier run of the same file, skipped" in out
    assert "5 runs repeat another file's run, skipped" in out  # the copy's line 6 as well: its first is line 5 of the log
    assert re.search(r"2 runs skipped, not a fair try: .*mtl_run\.jsonl:4, \S+copy\.jsonl:4\n", out), out


def test_only_bad_records_fail(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    lines = RUNLOG.read_text().splitlines()
    log.write_text("\n".join([lines[0], '{"record": "run", "task": {"id": "x"}, "steps": 3}', lines[ERROR_LINE - 1]])
                   + "\n")
    code, out = run_cli(str(log), "--dry-run")
    assert code == 1, out
    assert re.search(r"bad line: \S+runs\.jsonl:2: not a run record: steps", out), out
    assert row(out, "planned") == 1 and row(out, "skipped") == 1 and row(out, "failed") == 0


def test_an_error_run_is_never_judged_nor_distilled(tmp_path: Path, pool: MemoryPool) -> None:
    log = tmp_path / "runs.jsonl"
    log.write_text(RUNLOG.read_text().splitlines()[ERROR_LINE - 1] + "\n")

    def route(tool: str | None, messages: list) -> object:
        raise AssertionError(f"the model was asked ({tool}) about a run the provider ended")

    config = IngestConfig(formats=[MemoryType.SUMMARY], judge=True)
    report = ingest([log], pool, RoutedChatModel(route=route), config, ledger=Ledger(tmp_path / "ledger.jsonl"))
    [run] = report.runs
    assert (run.status, run.skip, run.line) == ("skipped", "infrastructure", 1) and report.ok
    assert "model provider error" in run.reason and pool.count() == 0
    assert not (tmp_path / "ledger.jsonl").exists()  # not in the pool: a later ingest says so again


def test_a_provider_exit_status_alone_is_an_infrastructure_error(tmp_path: Path) -> None:
    record = json.loads(RUNLOG.read_text().splitlines()[0])
    record.update(verdict=None, exit_status="model_error")
    log = tmp_path / "runs.jsonl"
    log.write_text(json.dumps(record) + "\n")
    report = ingest([log], None, None, IngestConfig(formats=[MemoryType.TRAJECTORY], dry_run=True))
    assert [(r.status, r.skip) for r in report.runs] == [("skipped", "infrastructure")]
    assert "exit status model_error" in report.runs[0].reason


@pytest.fixture
def pool(tmp_path: Path, embeddings):
    opened = MemoryPool.open(str(tmp_path / "pool"), embeddings=embeddings)
    yield opened
    opened.close()
