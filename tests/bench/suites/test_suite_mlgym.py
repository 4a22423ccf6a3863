"""The mlgym suite over a checkout of our own tasks in MLGym's config format."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mtl_graph.bench.records import Condition
from mtl_graph.bench.runners import NoopRunner, OracleRunner
from mtl_graph.bench.suites import REFERENCE_KEY, SuiteError, load_suite
from mtl_graph.bench.suites.hidden import checks_python
from mtl_graph.sandbox.bwrap import BwrapSandbox
from helpers.paths import FIXTURES

CHECKOUT = FIXTURES / "mlgym"
SANDBOX = "bwrap" if BwrapSandbox.is_available() else "local"
BETTER = {"mlgym/patternPennies": {"strategy.py": "def row_strategy(history):\n"
                                                  "    return 1 if len(history) % 3 == 2 else 0\n"},
          "mlgym/meanForecast": {"submission.csv": "day,count\n5,18\n6,20.5\n"}}
WORSE = {"mlgym/patternPennies": {"strategy.py": "def row_strategy(history):\n    return 1\n"},
         "mlgym/meanForecast": {"submission.csv": "day,count\n5,10\n6,10\n"}}


def _passed(runner, task, files=None) -> bool:
    if files is not None:
        task = task.model_copy(update={"metadata": {**task.metadata, REFERENCE_KEY: files}})
    return runner.run(task, Condition(), 0, None).passed


def test_runnable_tasks_load_and_the_rest_say_why():
    suite = load_suite(f"mlgym:{CHECKOUT}")
    assert suite.total == 5 and [t.id for t in suite.tasks] == ["mlgym/meanForecast", "mlgym/patternPennies"]
    skipped = {s.id: s.reason for s in suite.skipped}
    assert skipped["mlgym/broken"].startswith("broken.yaml is not valid YAML")
    assert skipped["mlgym/mazeAgent"] == (f"needs Python packages mtl_fixture_maze_env in {checks_python()} "
                                          "(MLGym's Docker image installs them)")
    assert "GPU" in skipped["mlgym/tinyLM"]
    forecast, pennies = suite.tasks
    assert (forecast.metadata["metric"], forecast.metadata["lower_is_better"]) == ("RMSE", True)
    assert (pennies.metadata["metric"], pennies.metadata["lower_is_better"]) == ("Score", False)
    assert "DAILYCOUNTS:" in forecast.instruction and "{dataset_docs}" not in forecast.instruction


def test_starter_code_and_data_are_laid_out_as_mlgym_does(tmp_path):
    forecast, pennies = load_suite(f"mlgym:{CHECKOUT}").tasks
    assert sorted(pennies.files) == ["evaluate.py", "partner.py", "strategy.py"]
    assert sorted(forecast.files) == ["data/answers.csv", "data/test.csv", "data/train.csv", "evaluate.py"]
    assert forecast.test_files == ["evaluate.py", "data/answers.csv", "data/test.csv", "data/train.csv"]
    assert (pennies.materialize(tmp_path / "ws") / "partner.py").is_file()


def test_beating_the_baseline_passes_and_matching_or_missing_it_fails():
    oracle, noop = OracleRunner(sandbox=SANDBOX), NoopRunner(sandbox=SANDBOX)
    for task in load_suite(f"mlgym:{CHECKOUT}").tasks:
        assert _passed(oracle, task, BETTER[task.id]), task.id
        assert not _passed(oracle, task, WORSE[task.id]), task.id
        assert not _passed(noop, task), task.id  # the starter equals the baseline, or there is no submission


def _copy(tmp_path) -> Path:
    shutil.copytree(CHECKOUT, tmp_path / "mlgym")
    return tmp_path / "mlgym"


@pytest.mark.parametrize("edit, task_id, reason", [
    (lambda r: (r / "data/patternPennies/partner.py").unlink(), "patternPennies",
     "data/patternPennies/partner.py is missing"),
    (lambda r: (r / "configs/datasets/dailyCounts.yaml").write_text("name: d\ndata_path: org/repo\n"), "meanForecast",
     "needs dataset d fetched from org/repo (not local)"),
    (lambda r: (r / "configs/datasets/dailyCounts.yaml").unlink(), "meanForecast",
     "dataset config datasets/dailyCounts.yaml is missing"),
    (lambda r: (r / "configs/tasks/patternPennies.yaml").write_text("id: p\nname: p\n"), "patternPennies",
     "patternPennies.yaml lacks description, task_entrypoint, evaluation_paths"),
    (lambda r: (r / "data/meanForecast/data/train.csv").write_bytes(b"\xff\xfe\x00"), "meanForecast",
     "data/meanForecast/data/train.csv is binary"),
])
def test_a_broken_task_is_skipped_with_one_line(tmp_path, edit, task_id, reason):
    root = _copy(tmp_path)
    edit(root)
    skipped = {s.id: s.reason for s in load_suite(f"mlgym:{root}").skipped}
    assert skipped[f"mlgym/{task_id}"].startswith(reason)


def test_not_a_checkout(tmp_path):
    with pytest.raises(SuiteError, match="not an MLGym checkout"):
        load_suite(f"mlgym:{tmp_path}")
    (tmp_path / "configs" / "tasks").mkdir(parents=True)
    with pytest.raises(SuiteError, match="no task configs"):
        load_suite(f"mlgym:{tmp_path}")
