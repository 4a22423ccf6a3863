"""`mtl ingest` and the ingest engine, end to end into a real embedded pool with the local embedder."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mtl_graph.cli.ingest import ingest as ingest_command
from mtl_graph.importers.ingest import LEDGER_FILE, IngestConfig, IngestInterrupted, Ledger, ingest
from helpers.fake_models import RoutedChatModel
from mtl_graph.memory.base import MemoryType, Outcome
from mtl_graph.memory.formats.summary import SummaryMemory
from mtl_graph.memory.pool.pool import MemoryPool
from helpers.paths import LOGS

GOOD = [LOGS / d for d in ("runlog", "langchain", "mini_swe_agent", "swe_agent")]
SUMMARIES = {
    "pallets__flask-4992": "A web framework's config loader could only open files in text mode, which broke binary TOML parsers.",
    "astropy__astropy-12907": "Separability of nested compound astronomy models was computed wrongly by a matrix helper.",
    "django__django-11099": "Username validators used a regex anchor that accepts a trailing newline in user names.",
    "HumanEval/3": "Write a function that detects whether a bank account balance ever drops below zero.",
    "report_csv_messages": "A CSV report parser crashed on empty lines and had to skip them.",
    "fizzbuzz-cli": "Write a FizzBuzz command-line script that prints numbers with Fizz and Buzz substitutions.",
    "json-config-merge": "Implement a deep merge of two nested dictionaries without mutating the inputs.",
}
DECISION = {"spec_satisfied": True, "technically_correct": True, "no_regressions": True, "interfaces_respected": True,
            "verified_with_evidence": True, "reasoning": "Tests were run and passed.", "verdict": "pass"}


def task_of(messages: list) -> str:
    return re.search(r"## Task (\S+) \(domain", messages[1].content).group(1)


def route(tool: str | None, messages: list) -> object:
    if tool == "JudgeDecision":
        return DECISION
    task = task_of(messages)
    if tool == "SummaryDraft":
        return {"task_summary": SUMMARIES[task] + " It came with tests.",
                "experience_summary": f"The agent inspected the code, edited it and ran checks ({task})."}
    raise AssertionError(f"unexpected tool {tool}")


@pytest.fixture
def pool(tmp_path: Path, embeddings):
    opened = MemoryPool.open(str(tmp_path / "pool"), embeddings=embeddings)
    yield opened
    opened.close()


def config(**kw: object) -> IngestConfig:
    return IngestConfig(formats=[MemoryType.SUMMARY, MemoryType.TRAJECTORY], domain="mixed", **kw)


def test_ingest_then_search_finds_the_new_memories(pool: MemoryPool) -> None:
    model = RoutedChatModel(route=route, model_name="scripted-1")
    report = ingest(GOOD, pool, model, config(concurrency=3))
    assert report.ok and report.count("ingested") == 7, report
    assert pool.count() == 14
    hits = pool.search("regex anchor accepts trailing newline in usernames", type="summary", k=1)
    assert isinstance(hits[0].memory, SummaryMemory) and hits[0].memory.source_task_ids == ["django__django-11099"]
    memory = hits[0].memory
    assert memory.outcome == Outcome.SUCCESS  # judged: the SWE-agent log carries no label
    assert memory.sources[0].distill_model == "scripted-1" and memory.sources[0].domain == "mixed"
    humaneval = pool.search("bank balance below zero", type="summary", k=1)[0].memory
    assert humaneval.domains == ["humaneval"]  # the log's own domain wins over --domain
    assert (Path(pool.location) / LEDGER_FILE).is_file()
    assert "hunter2-local-dev" not in json.dumps([m.model_dump(mode="json") for m in pool])


def test_resume_after_interrupted_ingest(pool: MemoryPool) -> None:
    calls: list[str] = []
    interrupted: list[bool] = []

    def interrupting(tool: str | None, messages: list) -> object:
        if tool == "SummaryDraft":
            calls.append(task_of(messages))
            if len(calls) == 3 and not interrupted:
                interrupted.append(True)
                raise KeyboardInterrupt
        return route(tool, messages)

    with pytest.raises(IngestInterrupted) as stopped:
        ingest(GOOD, pool, RoutedChatModel(route=interrupting), config(concurrency=1))
    assert pool.count() == 4  # two runs finished before the interruption
    partial = stopped.value.report
    assert partial.interrupted and partial.count("ingested") == 2 and stopped.value.pending == 5
    calls.clear()
    report = ingest(GOOD, pool, RoutedChatModel(route=interrupting), config(concurrency=2))
    assert report.count("skipped") == 2 and report.count("ingested") == 5 and report.ok
    assert all(r.reason == "already ingested" for r in report.runs if r.status == "skipped")
    assert len(calls) == 5 and pool.count() == 14
    again = ingest(GOOD, pool, RoutedChatModel(route=interrupting), config())
    assert again.count("skipped") == 7 and pool.count() == 14


def test_failed_format_is_reported_and_retried_on_resume(pool: MemoryPool) -> None:
    def bad_summaries(tool: str | None, messages: list) -> object:
        return {"task_summary": "x"} if tool == "SummaryDraft" else route(tool, messages)

    report = ingest([LOGS / "swe_agent"], pool, RoutedChatModel(route=bad_summaries), config())
    [run] = report.runs
    assert run.status == "failed" and run.reason.startswith("summary: no valid answer") and not report.ok
    assert pool.count() == 1  # the trajectory memory is kept and recorded
    fixed = RoutedChatModel(route=route)
    report = ingest([LOGS / "swe_agent"], pool, fixed, config())
    assert report.count("ingested") == 1 and pool.count() == 2
    # only the missing format was redone: one judge call and one summary call, no new trajectory memory
    assert len(fixed.calls) == 2 and "Summarise it as a memory" in fixed.calls[1][1].content


def test_bad_files_do_not_stop_the_batch(pool: MemoryPool) -> None:
    report = ingest([LOGS / "bad", LOGS / "swe_agent"], pool, RoutedChatModel(route=route), config())
    # bad_line.jsonl's good first run is ingested; only its bad second line is reported
    assert sorted(r.task_id for r in report.runs if r.status == "ingested") == ["django__django-11099", "fizzbuzz-cli"]
    assert len(report.file_failures) == 5 and not report.ok
    reasons = " | ".join(f.reason for f in report.file_failures)
    for name in ("empty.json", "malformed.traj.json", "binary.traj", "latin1.json:1", "bad_line.jsonl:2"):
        assert name in reasons
    # a JSON file of no known format found in a directory is skipped (agents write predictions beside their logs)
    assert [Path(f.path).name for f in report.skipped_files] == ["unknown.json"]
    assert all("\n" not in f.reason for f in report.file_failures)


def test_dry_run_and_uncertain_runs(tmp_path: Path, pool: MemoryPool) -> None:
    plan = ingest(GOOD, None, None, config(dry_run=True), ledger=Ledger(None))
    assert plan.count("planned") == 7 and plan.ok
    unsure = dict(DECISION, verdict="uncertain")
    model = RoutedChatModel(route=lambda tool, m: unsure if tool == "JudgeDecision" else route(tool, m))
    report = ingest([LOGS / "swe_agent", LOGS / "runlog"], pool, model, config(skip_uncertain=True))
    statuses = {r.task_id: (r.status, r.outcome) for r in report.runs}
    assert statuses["django__django-11099"] == ("skipped", "unknown")  # unlabelled, judged uncertain
    assert statuses["fizzbuzz-cli"] == ("ingested", "success")  # labelled by tests: label kept
    rejudged = ingest([LOGS / "runlog"], pool, model, config(judge=True), ledger=Ledger(None))
    assert {r.outcome for r in rejudged.runs} == {"unknown"}  # --judge overrides labels; uncertain kept


def test_duplicate_runs_and_missing_model(tmp_path: Path, pool: MemoryPool) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(LOGS / "swe_agent" / "django__django-11099.traj", copy / "again.traj")
    report = ingest([LOGS / "swe_agent", copy], pool, None, IngestConfig(formats=[MemoryType.TRAJECTORY]))
    assert [r.status for r in report.runs].count("skipped") == 1 and "same run as in" in report.runs[0].reason
    with pytest.raises(ValueError, match="a model is needed"):
        ingest(GOOD, pool, None, config())


def cli() -> typer.Typer:
    app = typer.Typer()
    app.command()(ingest_command)
    app.command("noop")(lambda: None)  # keeps typer in multi-command mode, as in the real `mtl`
    return app


def test_cli_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embeddings) -> None:
    import mtl_graph.llm.chat as chat

    model = RoutedChatModel(route=route)
    monkeypatch.setattr(chat, "chat_model", lambda name: model)
    location = str(tmp_path / "cli-pool")
    args = ["ingest", *map(str, GOOD), str(LOGS / "bad"), "--pool", location, "--model", "openai:gpt-x",
            "--formats", "summary,trajectory", "--concurrency", "2", "--domain", "mixed"]
    result = CliRunner().invoke(cli(), args)
    assert result.exit_code == 1, result.output
    assert "ingested" in result.output and "bad file" in result.output and "malformed.traj.json" in result.output
    assert re.search(r"bad line: \S*bad_line\.jsonl:2: not a run record: steps", result.output), result.output
    again = CliRunner().invoke(cli(), args[:1] + [str(p) for p in GOOD] + args[6:])
    assert again.exit_code == 0, again.output
    assert re.search(r"skipped\s*│\s*7", again.output)
    # a rerun says once that the runs are already in, instead of one line per run
    assert "7 runs already in the pool (ingested before), skipped" in again.output and "skipped:" not in again.output
    with MemoryPool.open(location, embeddings=embeddings) as opened:
        assert opened.count() == 14
        hit = opened.search("deep merge nested dictionaries", type="summary", k=1)[0].memory
        assert hit.source_task_ids == ["json-config-merge"] and hit.sources[0].distill_model == "openai:gpt-x"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--formats", "insights"], "unknown memory type"),
        (["--format", "no-such-agent"], "unknown log format"),
        (["--formats", "summary"], "--model is required"),
        (["--concurrency", "0"], "Invalid value"),
        (["--formats", ","], "invalid option: formats: List should have at least 1 item"),
    ],
)
def test_cli_bad_options(tmp_path: Path, extra: list[str], message: str) -> None:
    result = CliRunner().invoke(cli(), ["ingest", str(LOGS / "swe_agent"), "--pool", str(tmp_path / "p"), *extra])
    assert result.exit_code == 2 and message in result.output, result.output


def test_cli_directory_without_logs(tmp_path: Path) -> None:
    (tmp_path / "empty" / ".hidden").mkdir(parents=True)
    result = CliRunner().invoke(cli(), ["ingest", str(tmp_path / "empty"), "--dry-run"])
    assert result.exit_code == 2 and "no log files in" in result.output, result.output


def test_cli_missing_path_and_dry_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli(), ["ingest", str(tmp_path / "nope"), "--pool", str(tmp_path / "p")])
    assert result.exit_code == 2 and "no such file or directory" in result.output
    result = CliRunner().invoke(cli(), ["ingest", *map(str, GOOD), "--formats", "insight", "--dry-run",
                                        "--pool", str(tmp_path / "p")])
    assert result.exit_code == 0 and re.search(r"planned\s*│\s*7", result.output), result.output
    assert not (tmp_path / "p").exists()


def test_cli_unusable_pool_and_model(tmp_path: Path) -> None:
    blocker = tmp_path / "pool-is-a-file"
    blocker.write_text("not a pool")
    result = CliRunner().invoke(cli(), ["ingest", str(LOGS / "swe_agent"), "--pool", str(blocker),
                                        "--formats", "trajectory"])
    assert result.exit_code == 2 and "cannot open pool" in result.output, result.output
    result = CliRunner().invoke(cli(), ["ingest", str(LOGS / "swe_agent"), "--pool", str(tmp_path / "p"),
                                        "--model", "no-such-provider:model-x"])
    assert result.exit_code == 2 and "cannot use model 'no-such-provider:model-x'" in result.output, result.output


def test_ledger_survives_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / LEDGER_FILE
    path.write_text(json.dumps({"hash": "h1", "format": "summary", "task_id": "t", "memory_id": "m"}) + "\n"
                    + '{"hash": "h2", "form')
    ledger = Ledger(path)
    assert ledger.done("h1") == {"summary"} and ledger.done("h2") == set()
    ledger.record("h2", "t2", [("insight", "m2")])
    assert Ledger(path).done("h2") == {"insight"}
    assert Ledger.for_pool("http://localhost:6333").path is None
    assert Ledger.for_pool(str(tmp_path)).path == path


def test_custom_judge_protocol(pool: MemoryPool) -> None:
    from mtl_graph.core.trajectory import Verdict, VerdictStatus

    class TestsJudge:
        def judge(self, trajectory):  # stands in for the graph's test-based judge
            return Verdict(status=VerdictStatus.FAIL, reason="check exited 1", source="tests")

    report = ingest([LOGS / "swe_agent"], pool, RoutedChatModel(route=route),
                    IngestConfig(formats=[MemoryType.TRAJECTORY], judge=True), judge=TestsJudge())
    assert [r.outcome for r in report.runs] == ["failure"]
    assert next(iter(pool)).outcome == Outcome.FAILURE


def test_demonstrations_are_skipped_not_failed(pool: MemoryPool) -> None:
    report = ingest([LOGS / "shapes" / "not_runs", LOGS / "swe_agent"], pool, None,
                    IngestConfig(formats=[MemoryType.TRAJECTORY]))
    assert report.ok and report.count("ingested") == 1 and not report.file_failures
    [skipped] = report.skipped_files
    assert "version_twice_demo.traj" in skipped.path and "not a run" in skipped.reason


def _many_runs(path: Path, n: int) -> Path:
    """A run log of n distinct small runs (one JSON line each)."""
    template = json.loads((LOGS / "runlog" / "runs.jsonl").read_text().splitlines()[1])
    with path.open("w") as fh:
        for i in range(n):
            run = dict(template, task=dict(template["task"], id=f"fizzbuzz-{i}"))
            fh.write(json.dumps(run) + "\n")
    return path


def test_sigint_prints_the_summary_so_far_and_how_to_resume(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    logs = _many_runs(tmp_path / "runs.jsonl", 400)
    pool_dir = tmp_path / "pool"
    cmd = [sys.executable, "-m", "mtl_graph.cli", "ingest", str(logs), "--pool", str(pool_dir),
           "--formats", "trajectory", "--concurrency", "1"]
    # A suite started in the background (`make test &`, nohup) ignores SIGINT, and children inherit that: the CLI
    # must get the default disposition a terminal's Ctrl-C meets.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    ledger = pool_dir / LEDGER_FILE
    while proc.poll() is None and not (ledger.is_file() and ledger.read_text().count("\n") >= 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "interrupted" in err and "run the same command again to resume" in err and "Traceback" not in err
    done = int(re.search(r"ingested\s*│\s*(\d+)", out).group(1))
    assert 1 <= done < 400 and f"{400 - done} runs not done" in err
    # the rerun (planned only) skips what is in the ledger, in one line
    plan = subprocess.run(cmd + ["--dry-run"], capture_output=True, text=True, timeout=120)
    in_pool = {json.loads(line)["hash"] for line in ledger.read_text().splitlines()}
    assert len(in_pool) >= done  # runs in flight at the interrupt finish and reach the ledger
    assert plan.returncode == 0 and f"{len(in_pool)} runs already in the pool (ingested before), skipped" in plan.stdout, plan.stdout
    assert plan.stdout.count("\n") < 30


def test_cli_counts_demonstrations_and_repeats_in_one_line_each(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(LOGS / "swe_agent" / "django__django-11099.traj", copy / "again.traj")
    args = ["ingest", str(LOGS / "shapes" / "not_runs"), str(LOGS / "swe_agent"), str(copy), "--dry-run"]
    result = CliRunner().invoke(cli(), args)
    assert result.exit_code == 0, result.output
    assert "1 run repeats another file's run, skipped" in result.output
    assert re.search(r"1 file skipped, not a run: a SWE-agent demonstration .*: \S+version_twice_demo\.traj",
                     result.output), result.output


def test_interrupt_reports_every_run_that_reached_the_pool(tmp_path: Path, pool: MemoryPool) -> None:
    calls: list[str] = []

    def interrupting(tool: str | None, messages: list) -> object:
        if tool == "SummaryDraft":
            calls.append(task_of(messages))
            if len(calls) == 3:
                raise KeyboardInterrupt
        return route(tool, messages)

    ledger = Ledger(tmp_path / "ledger.jsonl")
    with pytest.raises(IngestInterrupted) as stopped:
        ingest(GOOD, pool, RoutedChatModel(route=interrupting), config(concurrency=3), ledger=ledger)
    report = stopped.value.report
    in_ledger = {json.loads(line)["hash"] for line in (tmp_path / "ledger.jsonl").read_text().splitlines()}
    # runs in flight when Ctrl-C came finished, reached the ledger, and are in the summary
    assert {r.content_hash for r in report.runs if r.status == "ingested"} == in_ledger
    assert len(in_ledger) >= 2 and stopped.value.pending == 7 - len(report.runs)
