"""The example scripts run as documented (offline) and show what they promise."""

import os
import subprocess
import sys
from helpers.paths import ROOT


def run_example(name: str, tmp_path) -> str:
    env = {**os.environ, "MTL_RUN_LOG": str(tmp_path / "runs.jsonl")}
    env.pop("MTL_MODEL", None)
    # From the repository root, as the README says: the examples name their tasks by relative path.
    done = subprocess.run([sys.executable, str(ROOT / "examples" / name)], capture_output=True, text=True,
                          env=env, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_quickstart_transfers_a_memory_across_domains(tmp_path):
    out = run_example("quickstart.py", tmp_path)
    assert "examples/primes: pass (judged by tests)" in out
    assert "examples/csv-totals: pass (judged by tests)" in out
    assert "retrieved insight memory from domain ['math']" in out  # offline: the scripted model distilled it


def test_wrapping_a_create_agent_agent(tmp_path):
    out = run_example("wrap_create_agent.py", tmp_path)
    assert "verdict: pass by tests" in out
    assert "retrieved: [('insight', ['shell']" in out
    assert "python3 greet.py" in out and "new memories: 1" in out
    assert "exit codes: [0, 0]" in out  # recorded by the sandbox tool, not parsed back from text
    assert "subprocess" not in (ROOT / "examples" / "wrap_create_agent.py").read_text()  # nothing on the host
    assert (tmp_path / "runs.jsonl").read_text().count('"record": "run"') == 1


def test_middleware_on_a_create_agent_agent(tmp_path):
    out = run_example("middleware.py", tmp_path).splitlines()
    first, second = out[0].split(), out[1].split()
    assert first[:2] == ["examples/primes", "success"] and "retrieved: []" in out[0]
    assert second[:2] == ["examples/csv-totals", "success"]
    learned = out[0].split("new: ")[1]
    assert learned != "[]" and learned.strip("[]'") in out[1].split("retrieved: ")[1]  # the first run's memory
    log = (tmp_path / "runs.jsonl").read_text()
    assert log.count('"record": "run"') == 2
    assert "not a valid tool" not in log  # the script's submit ends a bash-only agent's run, as a real model would


def test_pool_from_logs(tmp_path):
    out = run_example("pool_from_logs.py", tmp_path)
    assert "ingested 3 runs, 0 bad files; the pool holds 3 memories" in out
    assert "flask.Config.from_file" in out.splitlines()[1]
