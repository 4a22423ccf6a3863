"""SWE-bench instances through the official ``swebench`` package; needs a reachable Docker engine."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

from mtl_graph.bench.suites.base import Suite, SuiteError, sample
from mtl_graph.tasks import Task

DOMAIN = "swebench"
DEFAULT_DATASET = "princeton-nlp/SWE-bench_Lite"

# The agent edits a checkout; the check turns its diff into a prediction and lets the official harness
# build the instance's image, apply the patch and run FAIL_TO_PASS / PASS_TO_PASS tests.
_CHECK = (
    "git diff {base} > /tmp/mtl_patch.diff && python3 -c \"import json,sys; "
    "json.dump([{{'instance_id': '{iid}', 'model_name_or_path': 'mtl', 'model_patch': open('/tmp/mtl_patch.diff').read()}}], "
    "open('/tmp/mtl_preds.json', 'w'))\" && python3 -m swebench.harness.run_evaluation --dataset_name {dataset} "
    "--predictions_path /tmp/mtl_preds.json --instance_ids {iid} --run_id mtl && "
    "grep -q '\"resolved_ids\": \\[\"{iid}\"' mtl.mtl.json"
)


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
    return [dict(r) for r in load_swebench_dataset(dataset, "test")], dataset


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``swebench`` (SWE-bench Lite), ``swebench:DATASET`` or ``swebench:PATH.jsonl``."""
    spec = f"swebench:{arg}" if arg else "swebench"
    reason = unavailable()
    if reason:
        return Suite(spec=spec, name=DOMAIN, skip_reason=reason)
    rows, dataset = _instances(arg)
    tasks = []
    for row in sample(rows, limit, seed):
        try:
            iid, repo, base = row["instance_id"], row["repo"], row["base_commit"]
            statement = row["problem_statement"]
        except KeyError as exc:
            raise SuiteError(f"{dataset}: instance lacks {exc}") from None
        tasks.append(Task(
            id=iid,
            instruction=f"Resolve this issue in the repository checked out in the current directory.\n\n{statement}",
            domain=DOMAIN,
            setup=f"git clone -q https://github.com/{repo}.git . && git checkout -q {base}",
            check=_CHECK.format(base=base, iid=iid, dataset=dataset),
            check_timeout=1800.0,
            metadata={"suite": DOMAIN, "repo": repo, "base_commit": base},
        ))
    return Suite(spec=spec, name=DOMAIN, tasks=tasks, total=len(rows))
