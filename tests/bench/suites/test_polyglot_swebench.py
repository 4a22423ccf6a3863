"""SWE-bench: a clear skip without Docker; where Docker exists, the commands the tasks would run."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from mtl_graph.bench.suites import SuiteError, load_suite
from mtl_graph.bench.suites import swebench
from mtl_graph.sandbox import make_sandbox

INSTANCES = [
    {"instance_id": "acme__widgets-101", "repo": "acme/widgets", "base_commit": "0123456789abcdef",
     "problem_statement": "Widget.resize() ignores the aspect flag.", "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]"},
    {"instance_id": "acme__gadgets-7", "repo": "acme/gadgets", "base_commit": "fedcba9876543210",
     "problem_statement": "Gadget names lose their unicode."},
]


def test_without_docker_the_suite_is_skipped_with_the_reason():
    reason = swebench.unavailable()
    if reason is None:
        pytest.skip("a Docker engine answers here")
    suite = load_suite("swebench")
    assert suite.tasks == [] and suite.skip_reason == reason
    expected = ("'swebench' package is not installed" if importlib.util.find_spec("swebench") is None
                else "docker")
    assert expected in reason


@pytest.fixture
def instances(tmp_path, monkeypatch):
    monkeypatch.setattr(swebench, "unavailable", lambda: None)
    path = tmp_path / "instances.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in INSTANCES))
    return path


def test_where_docker_exists_setup_fetches_with_network_and_the_harness_checks(instances):
    suite = load_suite(f"swebench:{instances}")
    assert [t.id for t in suite.tasks] == ["acme__widgets-101", "acme__gadgets-7"] and suite.total == 2
    task = suite.tasks[0]
    assert task.setup_network and task.domain == "swebench"
    assert task.setup == ("git init -q . && git fetch -q --depth 1 https://github.com/acme/widgets.git "
                          "0123456789abcdef && git checkout -q FETCH_HEAD")
    assert "Widget.resize() ignores the aspect flag." in task.instruction
    assert task.metadata["image"] == "swebench/sweb.eval.x86_64.acme_1776_widgets-101:latest"
    call = [line for line in task.check.splitlines() if line.startswith("main(")][-1]
    assert call == (f"main({sys.executable!r}, {str(instances)!r}, 'test', 'acme__widgets-101', "
                    "'0123456789abcdef', 1800)")
    assert "swebench.harness.run_evaluation" in task.check and "--namespace" in task.check


def test_bad_instances_file_is_one_clear_error(instances):
    instances.write_text('{"instance_id": "x"}\n')
    with pytest.raises(SuiteError, match="instance lacks 'repo'"):
        load_suite(f"swebench:{instances}")
    instances.write_text("{not json\n")
    with pytest.raises(SuiteError, match="invalid instances file"):
        load_suite(f"swebench:{instances}")


def test_check_grades_nothing_when_the_agent_changed_nothing(instances, tmp_path):
    task = load_suite(f"swebench:{instances}").tasks[0]
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    (repo / "widget.py").write_text("def resize(w, h, aspect=False):\n    return w, h\n")
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True)
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    check = task.check.replace("0123456789abcdef", base)
    result = make_sandbox("local", repo).run(check, timeout=60)
    assert result.exit_code == 1 and "no changes to grade" in result.output
    (repo / "widget.py").write_text("def resize(w, h, aspect=False):\n    return (w, w) if aspect else (w, h)\n")
    (repo / "new.py").write_text("X = 1\n")
    script = f"from mtl_graph.bench.suites.checks import swebench as c; print(c.diff({base!r}))"
    # The sandbox handed the repository to its unprivileged uid; git run by the test's own user needs to trust it.
    trust = {**os.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
    patch = subprocess.run([sys.executable, "-c", script], cwd=repo, capture_output=True, text=True, env=trust).stdout
    assert "return (w, w) if aspect else (w, h)" in patch and "+++ b/new.py" in patch
