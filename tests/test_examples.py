"""The example scripts run as documented (offline) and show what they promise."""

import os
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def run_example(name: str, tmp_path) -> str:
    env = {**os.environ, "MTL_RUN_LOG": str(tmp_path / "runs.jsonl")}
    env.pop("MTL_MODEL", None)
    done = subprocess.run([sys.executable, str(ROOT / "examples" / name)], capture_output=True, text=True,
                          env=env, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_quickstart_transfers_a_memory_across_domains(tmp_path):
    out = run_example("quickstart.py", tmp_path)
    assert "examples/slugify: pass (judged by tests)" in out
    assert "examples/primes: pass (judged by tests)" in out
    assert "retrieved trajectory memory from domain ['strings']" in out


def test_wrapping_a_create_agent_agent(tmp_path):
    out = run_example("wrap_create_agent.py", tmp_path)
    assert "verdict: pass by tests" in out
    assert "retrieved: [('insight', ['shell']" in out
    assert "python3 greet.py" in out and "new memories: 1" in out
    assert "exit codes: [0, 0]" in out  # recorded by the sandbox tool, not parsed back from text
    assert "subprocess" not in (ROOT / "examples" / "wrap_create_agent.py").read_text()  # nothing on the host
    assert (tmp_path / "runs.jsonl").read_text().count('"record": "run"') == 1


def test_pool_from_logs(tmp_path):
    out = run_example("pool_from_logs.py", tmp_path)
    assert "ingested 3 runs, 0 bad files; the pool holds 3 memories" in out
    assert "flask.Config.from_file" in out.splitlines()[1]
