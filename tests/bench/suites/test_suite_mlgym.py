"""The mlgym suite over a checkout of our own tasks in MLGym's config format."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mtl_graph.bench.records import Condition
from mtl_graph.bench.runners import NoopRunner, OracleRunner
from mtl_graph.bench.suites import REFERENCE_KEY, SuiteError, load_suite
from mtl_graph.bench.suites.hidden import checks_python
from mtl_graph.bench.suites.checks import mlgym as check
from mtl_graph.bench.suites.mlgym import answer_files
from mtl_graph.sandbox.bwrap import BwrapSandbox
from helpers.paths import FIXTURES

CHECKOUT = FIXTURES / "mlgym"
SANDBOX = "bwrap" if BwrapSandbox.is_available() else "local"
ALWAYS = "def row_strategy(history):\n    return {}\n"
BETTER = {"mlgym/patternPennies": {"strategy.py": "def row_strategy(history):\n"
                                                  "    return 1 if len(history) % 3 == 2 else 0\n"},
          "mlgym/meanForecast": {"submission.csv": "day,count\n5,18\n6,20.5\n"},
          "mlgym/noisyDuel": {"strategy.py": ALWAYS.format(1)},
          "mlgym/survivalGuess": {"submission.csv": "PassengerId,Survived\n7,1\n8,0\n9,1\n10,0\n"}}
WORSE = {"mlgym/patternPennies": {"strategy.py": ALWAYS.format(1)},
         "mlgym/meanForecast": {"submission.csv": "day,count\n5,10\n6,10\n"},
         "mlgym/noisyDuel": {"strategy.py": ALWAYS.format(0)},
         "mlgym/survivalGuess": {"submission.csv": "PassengerId,Survived\n7,0\n8,0\n9,0\n10,0\n"}}
# As good as the starter code, written differently: it draws other numbers from the same seeds.
AS_GOOD = "import random\n\n\ndef row_strategy(history):\n    return random.choice([0, 1])\n"


def _tasks() -> dict:
    return {t.id: t for t in load_suite(f"mlgym:{CHECKOUT}").tasks}


def _passed(runner, task, files=None) -> bool:
    if files is not None:
        task = task.model_copy(update={"metadata": {**task.metadata, REFERENCE_KEY: files}})
    return runner.run(task, Condition(), 0, None).passed


def test_runnable_tasks_load_and_the_rest_say_why():
    suite = load_suite(f"mlgym:{CHECKOUT}")
    assert suite.total == 7 and [t.id for t in suite.tasks] == [
        "mlgym/meanForecast", "mlgym/noisyDuel", "mlgym/patternPennies", "mlgym/survivalGuess"]
    skipped = {s.id: s.reason for s in suite.skipped}
    assert skipped["mlgym/broken"].startswith("broken.yaml is not valid YAML")
    assert skipped["mlgym/mazeAgent"] == (f"needs Python packages mtl_fixture_maze_env in {checks_python()} "
                                          "(MLGym's Docker image installs them)")
    assert "GPU" in skipped["mlgym/tinyLM"]
    tasks = _tasks()
    assert (tasks["mlgym/meanForecast"].metadata["metric"], tasks["mlgym/meanForecast"].metadata["lower_is_better"]) \
        == ("RMSE", True)
    assert (tasks["mlgym/noisyDuel"].metadata["metric"], tasks["mlgym/noisyDuel"].metadata["lower_is_better"]) \
        == ("Score", False)
    forecast = tasks["mlgym/meanForecast"]
    assert "DAILYCOUNTS:" in forecast.instruction and "{dataset_docs}" not in forecast.instruction


def test_starter_code_and_data_are_laid_out_as_mlgym_does_without_the_answers(tmp_path):
    tasks = _tasks()
    pennies, forecast, survival = tasks["mlgym/patternPennies"], tasks["mlgym/meanForecast"], \
        tasks["mlgym/survivalGuess"]
    assert sorted(pennies.files) == ["evaluate.py", "partner.py", "strategy.py"]
    # the partner is the evaluation's own (the description never names partner.py): graded from its pristine copy
    assert pennies.test_files == ["evaluate.py", "partner.py"]
    assert sorted(forecast.files) == ["data/test.csv", "data/train.csv", "evaluate.py"]
    assert sorted(survival.files) == ["data/test.csv", "data/train.csv", "evaluate.py"]
    for task, answers in ((forecast, "data/answers.csv"), (survival, "data/ground_truth.csv")):
        assert answers in task.check_files and task.metadata["check_only"] == [answers]
        workspace = task.materialize(tmp_path / task.id.replace("/", "-"))
        assert not (workspace / answers).exists() and (workspace / "data" / "test.csv").is_file()
        assert task.check_files[answers] not in task.check  # not on the command line either
    # the upstream container's workspace is the workspace here
    assert "/home/agent/workspace" not in survival.files["evaluate.py"]
    assert "workspace_dir = '.'" in survival.files["evaluate.py"]


def test_controls_correct_passes_wrong_and_untouched_fail():
    oracle, noop = OracleRunner(sandbox=SANDBOX), NoopRunner(sandbox=SANDBOX)
    for task in _tasks().values():
        assert _passed(oracle, task, BETTER[task.id]), task.id
        assert not _passed(oracle, task, WORSE[task.id]), task.id
        assert not _passed(noop, task), task.id  # the starter ties itself, or there is no submission


def test_a_stochastic_task_s_starter_code_fails_every_time_and_an_equal_rewrite_fails_too():
    task = _tasks()["mlgym/noisyDuel"]
    noop, oracle = NoopRunner(sandbox=SANDBOX), OracleRunner(sandbox=SANDBOX)
    assert [_passed(noop, task) for _ in range(5)] == [False] * 5
    assert not _passed(oracle, task, {"strategy.py": AS_GOOD})


def test_single_seeded_runs_of_the_starter_code_straddle_the_recorded_baseline(tmp_path):
    """The task really is noisy: one evaluation against MLGym's recorded baseline passes the starter code now and
    then, which is what the check's measured baseline and margin are for."""
    workspace = _tasks()["mlgym/noisyDuel"].materialize(tmp_path / "ws")
    wrapper = tmp_path / "seeded.py"
    wrapper.write_text(check._SEEDED)
    scores = [check.evaluate(str(workspace), "evaluate.py", "python", "Score", 60, seed, str(wrapper), "starter")
              for seed in range(12)]
    assert len(set(scores)) > 1 and min(scores) < 0.5 < max(scores)
    again = check.evaluate(str(workspace), "evaluate.py", "python", "Score", 60, 3, str(wrapper), "starter")
    assert again == scores[3]  # a seed repeats exactly


def test_answers_and_evaluation_modules_are_graded_from_the_check_room_not_the_agent():
    oracle = OracleRunner(sandbox=SANDBOX)
    tasks = _tasks()
    # an answer key of the agent's own, matching its guesses, never reaches the check
    all_zero = "PassengerId,Survived\n7,0\n8,0\n9,0\n10,0\n"
    assert not _passed(oracle, tasks["mlgym/survivalGuess"],
                       {"submission.csv": all_zero, "data/ground_truth.csv": all_zero})
    # nor does an opponent rewritten to lose
    assert not _passed(oracle, tasks["mlgym/noisyDuel"], {"strategy.py": ALWAYS.format(0),
                                                         "opponent.py": "def opponent_choice(history):\n    return 0\n"})


@pytest.mark.parametrize("metrics, expected", [
    ({"Accuracy": 0.7}, 0.7), ({"accuracy": 0.7}, 0.7), ({"ACCURACY": 1}, 1.0),
    ({"accuracy": 0.7, "ACCURACY": 0.1}, None), ({"accuracy": True}, None), ({"accuracy": float("nan")}, None),
    ({"accuracy": "0.7"}, None), ({"acc": 0.7}, None), (None, None),
])
def test_the_metric_is_found_by_its_name_in_any_case_and_only_unambiguously(metrics, expected):
    assert check.metric_value(metrics, "Accuracy") == expected


def test_answer_files_are_decided_by_who_names_them():
    """Every combination of: the evaluation names the file, the agent's material names it, a split holds it."""
    for evaluation_names, given_names, in_split in itertools.product((True, False), repeat=3):
        evaluation = ["import os\nTRUTH = os.path.join('/w', 'data', 'key.csv')\n" if evaluation_names
                      else "print(1)\n"]
        given = "Use `key.csv` and train.csv." if given_names else "Use train.csv; answers are hidden."
        splits = ["./data/key*"] if in_split else ["./data/train*"]
        got = answer_files(["data/key.csv", "data/train.csv"], evaluation, given, splits)
        assert got == (["data/key.csv"] if evaluation_names and not given_names and not in_split else []), \
            (evaluation_names, given_names, in_split)
    # a longer name containing it is not a mention
    assert answer_files(["data/key.csv"], ["open('data/key.csv')"], "see old_key.csv.bak and key.csvx", []) == \
        ["data/key.csv"]


def test_the_seeded_wrapper_runs_a_script_as_python_would(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "helper.py").write_text("VALUE = 7\n")
    (tmp_path / "sub" / "evaluate.py").write_text(
        "import random, sys\nfrom helper import VALUE\nprint(__name__, sys.argv[1:], VALUE, random.random())\n")
    wrapper = tmp_path / "seeded.py"
    wrapper.write_text(check._SEEDED)
    run = lambda seed: subprocess.run([sys.executable, str(wrapper), str(seed), "sub/evaluate.py", "--x", "1"],  # noqa: E731
                                      cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert run(1).startswith("__main__ ['--x', '1'] 7 ") and run(1) == run(1) != run(2)


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
