"""The check of a SWE-bench task: the agent's diff becomes a prediction, the official harness grades it.

Runs in the task's workspace with only the stdlib; the suite appends one call to ``main(...)``. The harness runs
the instance's FAIL_TO_PASS and PASS_TO_PASS tests in the instance's Docker image, so it needs the Docker engine
(which pulls the image: the workspace's own network does not matter).
"""

import json
import os
import subprocess
import sys
import tempfile


def diff(base):
    """Everything the agent changed since base, new files included."""
    subprocess.run(["git", "add", "-A"], check=True, capture_output=True)
    return subprocess.run(["git", "diff", "--cached", base], check=True, capture_output=True, text=True).stdout


def resolved(report_path, instance_id):
    with open(report_path, encoding="utf-8") as fh:
        return instance_id in json.load(fh).get("resolved_ids", [])


def main(python, dataset, split, instance_id, base, timeout):
    patch = diff(base)
    if not patch.strip():
        print("no changes to grade")
        sys.exit(1)
    with tempfile.TemporaryDirectory(prefix="mtl-swebench-") as tmp:
        preds = os.path.join(tmp, "preds.json")
        with open(preds, "w", encoding="utf-8") as fh:
            json.dump([{"instance_id": instance_id, "model_name_or_path": "mtl", "model_patch": patch}], fh)
        argv = [python, "-m", "swebench.harness.run_evaluation", "--dataset_name", dataset, "--split", split,
                "--predictions_path", preds, "--instance_ids", instance_id, "--run_id", "mtl",
                "--max_workers", "1", "--namespace", "swebench", "--report_dir", tmp, "--timeout", str(timeout)]
        proc = subprocess.run(argv, cwd=tmp, capture_output=True, text=True)
        print(proc.stdout[-3000:] + proc.stderr[-3000:])
        report = os.path.join(tmp, "mtl.mtl.json")
        if proc.returncode != 0 or not os.path.exists(report):
            print("the SWE-bench harness did not finish (exit code %d)" % proc.returncode)
            sys.exit(2)
        ok = resolved(report, instance_id)
        print("%s %s" % (instance_id, "resolved" if ok else "not resolved"))
        sys.exit(0 if ok else 1)
