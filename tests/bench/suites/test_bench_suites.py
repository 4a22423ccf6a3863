"""Suite adapters: loading, seeded sampling, checks that pass with reference solutions and fail on stubs."""

from __future__ import annotations

import gzip
import json

import pytest

from mtl_graph.bench.records import Condition
from mtl_graph.bench.runners import NoopRunner, OracleRunner
from mtl_graph.bench.suites import REFERENCE_KEY, SuiteError, load_suite
from mtl_graph.bench.suites import base as suite_base
from mtl_graph.bench.suites.exercism import languages as exercism_languages
from helpers import paths

FIXTURES = paths.FIXTURES / "bench"
EXERCISM = FIXTURES / "exercism"
PROBLEMS = FIXTURES / "problems.jsonl"


def _verdicts(tasks):
    oracle, noop = OracleRunner(), NoopRunner()
    return {t.id: (oracle.run(t, Condition(), 0, None).passed, noop.run(t, Condition(), 0, None).passed)
            for t in tasks}


def test_humaneval_loads_all_and_samples_deterministically():
    full = load_suite("humaneval")
    assert full.total == 164 and len(full.tasks) == 164
    a, b = load_suite("humaneval", limit=10, seed=7), load_suite("humaneval", limit=10, seed=7)
    assert [t.id for t in a.tasks] == [t.id for t in b.tasks]
    assert [t.id for t in a.tasks] != [t.id for t in load_suite("humaneval", limit=10, seed=8).tasks]
    task = a.tasks[0]
    assert task.domain == "humaneval" and "solution.py" in task.files
    assert task.files["solution.py"] in task.metadata[REFERENCE_KEY]["solution.py"]
    assert "check(" not in task.files["solution.py"]  # the hidden tests stay out of the workspace


def test_humaneval_checks_pass_with_canonical_and_fail_on_stub():
    tasks = load_suite("humaneval", limit=3, seed=1).tasks
    assert set(_verdicts(tasks).values()) == {(True, False)}


def test_exercism_python_exercises_load_and_check(monkeypatch):
    real_which = exercism_languages.shutil.which
    monkeypatch.setattr(exercism_languages.shutil, "which", lambda t: None if t == "go" else real_which(t))
    suite = load_suite(f"exercism:{EXERCISM}")
    assert [t.id for t in suite.tasks] == ["exercism/python/leap", "exercism/python/word-count"]
    assert [(s.id, s.reason) for s in suite.skipped] == [
        ("exercism/go/leap", "go toolchain not found (needs go on PATH)")]
    word_count = suite.tasks[1]
    assert "Numbers count as words too" in word_count.instruction  # instructions.append.md
    assert "word_count.py" in word_count.instruction
    assert set(_verdicts(suite.tasks).values()) == {(True, False)}


def test_exercism_workspace_hides_the_example(tmp_path):
    task = load_suite(f"exercism:{EXERCISM}?languages=python").tasks[0]
    from mtl_graph.judging.ground_truth import run_setup
    from mtl_graph.sandbox import make_sandbox

    sandbox = make_sandbox("local", task.materialize(tmp_path / "ws"))
    run_setup(task, sandbox)
    assert not (tmp_path / "ws" / ".meta").exists()
    assert (tmp_path / "ws" / "leap_test.py").exists()


def test_jsonl_problems_stdin_and_function_calls():
    suite = load_suite(f"jsonl:{PROBLEMS}")
    assert suite.name == "problems"
    modes = {t.id: t.metadata["mode"] for t in suite.tasks}
    assert modes == {"problems/sum-pairs": "stdin", "problems/two-sum": "call", "problems/mean": "call"}
    assert "class Solution" in next(t for t in suite.tasks if t.id == "problems/two-sum").files["solution.py"]
    assert set(_verdicts(suite.tasks).values()) == {(True, False)}


def test_large_hidden_check_goes_to_a_file(monkeypatch):
    monkeypatch.setattr(suite_base, "_INLINE_LIMIT", 10)
    task = load_suite(f"jsonl:{PROBLEMS}", limit=1).tasks[0]
    assert task.check.startswith("python3 .mtl_check/")
    assert set(_verdicts([task]).values()) == {(True, False)}


def test_dir_suite_loads_task_directories():
    suite = load_suite(f"dir:{FIXTURES / 'tasks'}")
    assert {t.id: t.domain for t in suite.tasks} == {"fix-median": "tasks", "greeting": "shell"}
    assert set(_verdicts(suite.tasks).values()) == {(True, False)}


def test_swebench_is_skipped_with_a_reason(monkeypatch):
    from mtl_graph.bench.suites import swebench

    monkeypatch.setattr(swebench, "unavailable", lambda: "no Docker engine reachable")
    suite = load_suite("swebench")
    assert suite.tasks == [] and suite.skip_reason == "no Docker engine reachable"


@pytest.mark.parametrize("spec, message", [
    ("nosuch", "unknown suite 'nosuch'"),
    ("jsonl", "needs a path"),
    ("jsonl:/nonexistent/x.jsonl", "not found"),
    ("exercism:/nonexistent", "not found"),
    ("dir:/nonexistent", "not found"),
    ("humaneval:/nonexistent.jsonl.gz", "not found"),
])
def test_bad_specs_raise_clear_errors(spec, message):
    with pytest.raises(SuiteError, match=message):
        load_suite(spec)


def test_corrupt_jsonl_names_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(PROBLEMS.read_text().splitlines()[0] + "\n{not json\n")
    with pytest.raises(SuiteError, match=r"bad.jsonl:2: not valid JSON"):
        load_suite(f"jsonl:{bad}")
    bad.write_text(json.dumps({"id": "x", "statement": "do it"}) + "\n")
    with pytest.raises(SuiteError, match="no test cases"):
        load_suite(f"jsonl:{bad}")
    bad.write_text(json.dumps({"id": "x", "statement": "s", "tests": "eJzLSM3JyQcABiwCFQ=="}) + "\n")
    with pytest.raises(SuiteError, match="compressed test data"):
        load_suite(f"jsonl:{bad}")


def test_corrupt_humaneval_file(tmp_path):
    gz = tmp_path / "he.jsonl.gz"
    gz.write_bytes(b"not gzip at all")
    with pytest.raises(SuiteError, match="cannot read"):
        load_suite(f"humaneval:{gz}")
    with gzip.open(gz, "wt") as fh:
        fh.write(json.dumps({"task_id": "X/0", "prompt": "def f():\n"}) + "\n")
    with pytest.raises(SuiteError, match="lacks test, entry_point"):
        load_suite(f"humaneval:{gz}")


def test_corrupt_exercism_config_skips_only_that_exercise(tmp_path):
    import shutil

    root = tmp_path / "ex"
    shutil.copytree(EXERCISM / "python", root / "python")
    (root / "python/exercises/practice/leap/.meta/config.json").write_text("{broken")
    suite = load_suite(f"exercism:{root}")
    assert [t.id for t in suite.tasks] == ["exercism/python/word-count"]
    assert suite.skipped[0].id == "exercism/python/leap"
    assert suite.skipped[0].reason.startswith(".meta/config.json: invalid config")


def test_empty_exercism_root(tmp_path):
    with pytest.raises(SuiteError, match="no exercises"):
        load_suite(f"exercism:{tmp_path}")
