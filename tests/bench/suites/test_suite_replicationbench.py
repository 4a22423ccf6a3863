"""The replicationbench suite over a dataset of our own papers in ReplicationBench's format."""

from __future__ import annotations

import json
import shutil

import pytest

from mtl_graph.bench.records import Condition
from mtl_graph.bench.runners import NoopRunner, OracleRunner
from mtl_graph.bench.suites import REFERENCE_KEY, SuiteError, load_suite
from mtl_graph.bench.suites.hidden import checks_python, gpu_reason
from mtl_graph.sandbox.bwrap import BwrapSandbox
from helpers.paths import FIXTURES

CHECKOUT = FIXTURES / "replicationbench"
SANDBOX = "bwrap" if BwrapSandbox.is_available() else "local"
OUTER = "replicationbench/toy_orbits/outer_period"
LIST = "replicationbench/toy_orbits/period_list"


def _answer(task, text: str) -> bool:
    task = task.model_copy(update={"metadata": {**task.metadata, REFERENCE_KEY: {"submission.json": text}}})
    return OracleRunner(sandbox=SANDBOX).run(task, Condition(), 0, None).passed


def _tasks(root=CHECKOUT):
    return {t.id: t for t in load_suite(f"replicationbench:{root}").tasks}


def test_papers_load_as_one_task_per_result_and_the_rest_say_why():
    suite = load_suite(f"replicationbench:{CHECKOUT}")
    assert suite.total == 6 and [t.id for t in suite.tasks] == [OUTER, LIST]
    assert {t.metadata["paper"] for t in suite.tasks} == {"toy_orbits"}
    skipped = {s.id: s.reason for s in suite.skipped}
    assert skipped["replicationbench/broken"] == "broken.json is not valid JSON (Expecting value at line 2)"
    assert skipped["replicationbench/toy_orbits/unfinished"] == "unfinished.json lacks expected_output, tolerance"
    assert skipped["replicationbench/remote_survey/galaxy_count"].startswith(
        "its data (huggingface) is not here and runs have no network: put it in ")
    gpu = skipped["replicationbench/gpu_lensing/einstein_radius"]
    assert gpu == (gpu_reason() or f"needs Python packages mtl-fixture-absent-package in {checks_python()} "
                                   "(the dependencies of gpu_lensing)")
    assert load_suite(f"replicationbench:{CHECKOUT / 'src' / 'dataset'}").total == 6  # the dataset directory


def test_the_agent_gets_the_masked_paper_and_data_but_not_the_answer(tmp_path):
    task = _tasks()[LIST]
    workspace = task.materialize(tmp_path / "ws")
    assert sorted(p.name for p in workspace.iterdir()) == ["orbits.csv", "paper.txt"]
    assert "[MASKED]" in (workspace / "paper.txt").read_text()
    assert "2.8284" not in task.instruction + task.check + (workspace / "paper.txt").read_text()
    assert '{"period_list": ANSWER}' in task.instruction and "a list of 3 numbers" in task.instruction


def test_answers_within_tolerance_pass_and_others_fail():
    tasks = _tasks()
    assert all(OracleRunner(sandbox=SANDBOX).run(t, Condition(), 0, None).passed for t in tasks.values())
    assert not any(NoopRunner(sandbox=SANDBOX).run(t, Condition(), 0, None).passed for t in tasks.values())
    outer, periods = tasks[OUTER], tasks[LIST]
    assert _answer(outer, '{"outer_period": 8.04}')
    assert not _answer(outer, '{"outer_period": 8.2}')
    assert not _answer(outer, "{'outer_period': None}")  # the benchmark's own "None when not computed"
    assert not _answer(outer, "not json at all")
    assert _answer(periods, json.dumps({"period_list": [1.001, 2.83, 7.97]}))
    assert not _answer(periods, json.dumps({"period_list": [1.0, 2.8284]}))


def test_a_downloaded_workspace_makes_a_remote_paper_runnable(tmp_path):
    root = tmp_path / "rb"
    shutil.copytree(CHECKOUT, root)
    (root / "workspaces" / "remote_survey").mkdir(parents=True)
    (root / "workspaces" / "remote_survey" / "catalogue.csv").write_text("id\n1\n")
    task = _tasks(root)["replicationbench/remote_survey/galaxy_count"]
    assert (task.materialize(tmp_path / "ws") / "catalogue.csv").is_file()


@pytest.mark.parametrize("edit, task_id, reason", [
    (lambda d: (d / "manuscripts/masked/toy_orbits.txt").unlink(), "toy_orbits/outer_period",
     "no manuscripts/masked/toy_orbits.txt (the unmasked text states the answers)"),
    (lambda d: (d / "papers/toy_orbits.json").write_text('{"paper_id": "toy_orbits"}'), "toy_orbits/outer_period",
     "toy_orbits.json lacks paper_id or title"),
    (lambda d: (d / "tasks/toy_orbits/outer_period.json").write_text("[1, 2"), "toy_orbits/outer_period",
     "outer_period.json is not valid JSON"),
])
def test_a_broken_paper_or_task_is_skipped_with_one_line(tmp_path, edit, task_id, reason):
    root = tmp_path / "rb"
    shutil.copytree(CHECKOUT, root)
    edit(root / "src" / "dataset")
    skipped = {s.id: s.reason for s in load_suite(f"replicationbench:{root}").skipped}
    assert skipped[f"replicationbench/{task_id}"].startswith(reason)


def test_not_a_dataset(tmp_path):
    with pytest.raises(SuiteError, match="not a ReplicationBench dataset"):
        load_suite(f"replicationbench:{tmp_path}")
    (tmp_path / "papers").mkdir()
    with pytest.raises(SuiteError, match="no paper files"):
        load_suite(f"replicationbench:{tmp_path}")


PREDECESSOR = FIXTURES / "replicationbench_predecessor"  # papers/masked_texts, tasks/ and data/ beside papers/
RATE, FINAL = "replicationbench/orbit_decay/decay_rate", "replicationbench/orbit_decay/final_period"


def test_the_predecessor_layout_loads_and_the_rest_say_why():
    suite = load_suite(f"replicationbench:{PREDECESSOR}")
    assert suite.total == 6 and [t.id for t in suite.tasks] == [RATE, FINAL]
    skipped = {s.id: s.reason for s in suite.skipped}
    assert skipped == {
        "replicationbench/orbit_decay/period_plot":
            "kind 'figure': only numeric tasks are graded, as the benchmark's own loader does",
        "replicationbench/pinned_tool/count": skipped["replicationbench/pinned_tool/count"],
        "replicationbench/survey_sim/count": "source 'showyourwork': the benchmark is the expert-written papers",
        "replicationbench/unmasked/count": "no papers/masked_texts/unmasked.txt (the unmasked text states the answers)",
    }
    assert skipped["replicationbench/pinned_tool/count"].startswith(
        "cannot check the dependency 'git+https://example.invalid/tool.git@0123456789abcdef': not a requirement")
    assert skipped["replicationbench/pinned_tool/count"].endswith("(the dependencies of pinned_tool)")


def test_the_predecessor_gives_the_masked_text_and_the_data(tmp_path):
    task = {t.id: t for t in load_suite(f"replicationbench:{PREDECESSOR}").tasks}[FINAL]
    workspace = task.materialize(tmp_path / "ws")
    assert sorted(p.name for p in workspace.iterdir()) == ["decay.csv", "paper.txt"]
    paper = (workspace / "paper.txt").read_text()
    assert "[NUMERICAL_RESULT] days" in paper and "9.88" not in paper + task.instruction + task.check
    assert "least-squares slope" in task.instruction  # the paper's other_instructions


def test_predecessor_controls_correct_passes_noop_and_wrong_fail():
    tasks = {t.id: t for t in load_suite(f"replicationbench:{PREDECESSOR}").tasks}
    assert all(OracleRunner(sandbox=SANDBOX).run(t, Condition(), 0, None).passed for t in tasks.values())
    assert not any(NoopRunner(sandbox=SANDBOX).run(t, Condition(), 0, None).passed for t in tasks.values())
    rate, final = tasks[RATE], tasks[FINAL]
    assert _answer(rate, '{"decay_rate": 0.0204}') and _answer(final, '{"final_period": 9.8849}')
    assert not _answer(rate, '{"decay_rate": -0.02}')  # the slope's sign: the task asks for a positive rate
    assert not _answer(final, '{"final_period": 9.9}')  # the last measurement, not the extrapolation


def test_a_marker_that_applies_makes_the_dependency_a_need(tmp_path):
    root = tmp_path / "rs"
    shutil.copytree(PREDECESSOR, root)
    paper = json.loads((root / "papers" / "orbit_decay.json").read_text())
    paper["execution_requirements"]["dependencies"] = ["mtl-fixture-absent-package>=1; python_version >= '3'"]
    (root / "papers" / "orbit_decay.json").write_text(json.dumps(paper))
    skipped = {s.id: s.reason for s in load_suite(f"replicationbench:{root}").skipped}
    assert skipped[RATE] == (f"needs Python packages mtl-fixture-absent-package>=1 in {checks_python()} "
                             "(the dependencies of orbit_decay)")
