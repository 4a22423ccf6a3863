"""The check of an MLGym task: run its evaluation script, read the metrics it prints as JSON, beat the baseline.

Stdlib only; the suite appends one call to ``main(...)``. The task passes when the first baseline metric is
strictly better than its baseline score (lower for losses and errors, higher otherwise).
"""

import glob
import json
import subprocess
import sys


def metrics_of(output):
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def main(script, mode, metric, baseline, lower_is_better, timeout):
    argv = [sys.executable, script]
    if mode == "csv":
        argv += ["--submission_file", "submission.csv"]
    elif mode == "model":
        configs = sorted(glob.glob("**/*.yaml", recursive=True))
        if not configs:
            print("no model configuration (*.yaml) to evaluate")
            sys.exit(1)
        argv += ["--config_fname", configs[0]]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print("evaluation timed out after %ss" % timeout)
        sys.exit(1)
    print(proc.stdout[-3000:] + proc.stderr[-3000:])
    metrics = metrics_of(proc.stdout)
    if proc.returncode != 0 or metrics is None or not isinstance(metrics.get(metric), (int, float)):
        print("the evaluation gave no %r metric (exit code %d)" % (metric, proc.returncode))
        sys.exit(1)
    value = float(metrics[metric])
    better = value < baseline if lower_is_better else value > baseline
    print("%s = %r, baseline %r (%s is better): %s" % (metric, value, baseline, "lower" if lower_is_better
                                                      else "higher", "beats the baseline" if better else "does not"))
    sys.exit(0 if better else 1)
