"""SWE-bench instances graded by the official ``swebench`` harness; needs a reachable Docker engine.

Setup (with network) clones the repository at the instance's base commit; the agent then works without
network; the check turns its diff into a prediction and lets the harness run the instance's tests in the
instance's image (see checks/swebench.py).
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from mtl_graph.bench.suites.base import Suite, SuiteError, hidden_python_check, sample
from mtl_graph.core.task import Task

DOMAIN = "swebench"
DEFAULT_DATASET = "princeton-nlp/SWE-bench_Lite"
SPLIT = "test"
EVAL_TIMEOUT_S = 1800


def unavailable() -> str | None:
    """Why SWE-bench cannot run here, or None."""
    if importlib.util.find_spec("swebench") is None:
        return "the 'swebench' package is not installed (pip install swebench)"
    if shutil.which("docker") is None:
        return "no docker client on PATH; SWE-bench runs each instance in a Docker image"
    try:
        ok = subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return None if ok else "no Docker engine reachable (docker info failed); SWE-bench needs one"


def instance_image(instance_id: str) -> str:
    """The prebuilt image the official harness pulls for an instance."""
    return f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_').lower()}:latest"


def _instances(arg: str | None) -> tuple[list[dict], str]:
    if arg and Path(arg).expanduser().is_file():
        path = Path(arg).expanduser()
        try:
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SuiteError(f"{path}: invalid instances file ({exc})") from None
        return rows, str(path)
    from swebench.harness.utils import load_swebench_dataset

    dataset = arg or DEFAULT_DATASET
    return [dict(r) for r in load_swebench_dataset(dataset, SPLIT)], dataset


def instance_task(row: dict, dataset: str) -> Task:
    try:
        iid, repo, base, statement = row["instance_id"], row["repo"], row["base_commit"], row["problem_statement"]
    except (KeyError, TypeError) as exc:
        raise SuiteError(f"{dataset}: instance lacks {exc}") from None
    script = resources.files("mtl_graph.bench.suites.checks").joinpath("swebench.py").read_text(encoding="utf-8")
    call = f"main({sys.executable!r}, {dataset!r}, {SPLIT!r}, {iid!r}, {base!r}, {EVAL_TIMEOUT_S})"
    check, check_files = hidden_python_check(f"{script}\n\n{call}\n")
    return Task(
        id=iid,
        instruction=f"Resolve this issue in the repository checked out in the current directory.\n\n{statement}",
        domain=DOMAIN,
        files=check_files,
        # A fetch of the one commit, not a clone: the workspace may already hold the check's files.
        setup=(f"git init -q . && git fetch -q --depth 1 https://github.com/{shlex.quote(repo)}.git "
               f"{shlex.quote(base)} && git checkout -q FETCH_HEAD"),
        setup_network=True,
        check=check,
        check_timeout=EVAL_TIMEOUT_S + 300.0,
        metadata={"suite": DOMAIN, "repo": repo, "base_commit": base, "image": instance_image(iid)},
    )


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``swebench`` (SWE-bench Lite), ``swebench:DATASET`` or ``swebench:PATH.jsonl``."""
    spec = f"swebench:{arg}" if arg else "swebench"
    reason = unavailable()
    if reason:
        return Suite(spec=spec, name=DOMAIN, skip_reason=reason)
    rows, dataset = _instances(arg)
    tasks = [instance_task(row, dataset) for row in sample(rows, limit, seed)]
    return Suite(spec=spec, name=DOMAIN, tasks=tasks, total=len(rows))
