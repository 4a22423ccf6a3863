"""The check of an MLGym task: run its evaluation script, read the metrics it prints as JSON, beat the baseline.

Stdlib only; the suite appends one call to ``main(...)`` and defines ``PAYLOAD``: ``starter`` (the pristine text of
the starter files the agent may change) and ``keep`` (the files of the room that are the evaluation's own: its
scripts, data and check-only answers).

MLGym's evaluations of games and simulations are unseeded, so one run of the untouched starter code lands above
its recorded baseline about half the time. Here every evaluation runs under a fixed seed (``random``, numpy's
global generator, ``PYTHONHASHSEED``), and, where the starter code can itself be evaluated (a copy of the room with
the starter files restored), the baseline is measured beside the submission: RUNS evaluations each, seed i for the
i-th of both, and the submission passes when its mean beats the starter's by more than MARGIN_SE standard errors
(Welch). The untouched starter draws the same numbers as the baseline and ties it; a submission no better than the
starter passes with probability at most P(T_{RUNS-1} > MARGIN_SE), under 1%. Where the starter produces no metric
(a CSV task without a submission), the recorded baseline is the bar: an evaluation that repeats exactly is
compared once, one that varies is run RUNS times and its mean must clear the baseline by MARGIN_SE of its own
standard errors.
"""

import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

RUNS = 5
MARGIN_SE = 4.0
SEED_BASE = 20240
_SEEDED = """\
import os, random, runpy, sys
seed, script = int(sys.argv[1]), sys.argv[2]
random.seed(seed)
try:
    import numpy
    numpy.random.seed(seed)
except ImportError:
    pass
sys.argv = sys.argv[2:]
sys.path[0] = os.path.dirname(os.path.abspath(script))
runpy.run_path(script, run_name="__main__")
"""


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


def metric_value(metrics, metric):
    """The metric by its configured name, else by the one key that matches it case-insensitively (MLGym's configs
    name ``Accuracy`` where the script prints ``accuracy``)."""
    if metrics is None:
        return None
    if metric in metrics:
        value = metrics[metric]
    else:
        keys = [k for k in metrics if isinstance(k, str) and k.lower() == metric.lower()]
        value = metrics[keys[0]] if len(keys) == 1 else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _argv(script, mode, cwd):
    argv = [script]
    if mode == "csv":
        argv += ["--submission_file", "submission.csv"]
    elif mode == "model":
        configs = sorted(glob.glob("**/*.yaml", root_dir=cwd, recursive=True))
        if not configs:
            return None
        argv += ["--config_fname", configs[0]]
    return argv


def evaluate(cwd, script, mode, metric, timeout, seed, wrapper, label):
    """The metric of one seeded evaluation in cwd, or None (the output says why)."""
    argv = _argv(script, mode, cwd)
    if argv is None:
        print("%s: no model configuration (*.yaml) to evaluate" % label)
        return None
    env = dict(os.environ, PYTHONHASHSEED=str(seed))
    try:
        proc = subprocess.run([sys.executable, wrapper, str(seed), *argv], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print("%s: evaluation timed out after %ss" % (label, timeout))
        return None
    value = metric_value(metrics_of(proc.stdout), metric) if proc.returncode == 0 else None
    if value is None:
        print("%s: the evaluation gave no %r metric (exit code %d)\n%s%s" % (
            label, metric, proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:]))
    return value


def _starter_room(keep, starter):
    """A copy of the room's evaluation files with the pristine starter code: what the baseline is measured in."""
    twin = tempfile.mkdtemp(prefix="mlgym-starter-")
    for rel in keep:
        if os.path.isfile(rel):
            os.makedirs(os.path.join(twin, os.path.dirname(rel)), exist_ok=True)
            shutil.copyfile(rel, os.path.join(twin, rel))
    for rel, text in starter.items():
        os.makedirs(os.path.join(twin, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(twin, rel), "w", encoding="utf-8") as fh:
            fh.write(text)
    return twin


def _mean_var(values):
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1) if len(values) > 1 else 0.0
    return mean, var


def main(script, mode, metric, baseline, lower_is_better, timeout):
    sign = -1.0 if lower_is_better else 1.0
    word = "lower" if lower_is_better else "higher"
    tools = tempfile.mkdtemp(prefix="mlgym-check-")
    wrapper = os.path.join(tools, "seeded.py")
    with open(wrapper, "w", encoding="utf-8") as fh:
        fh.write(_SEEDED)
    args = (script, mode, metric, timeout)
    first = evaluate(".", *args, SEED_BASE, wrapper=wrapper, label="submission")
    if first is None:
        sys.exit(1)
    twin = _starter_room(PAYLOAD["keep"], PAYLOAD["starter"])  # noqa: F821 (defined by the suite)
    start = evaluate(twin, *args, SEED_BASE, wrapper=wrapper, label="starter code")
    if start is not None:
        ours = [first] + [evaluate(".", *args, SEED_BASE + i, wrapper=wrapper, label="submission")
                          for i in range(1, RUNS)]
        theirs = [start] + [evaluate(twin, *args, SEED_BASE + i, wrapper=wrapper, label="starter code")
                            for i in range(1, RUNS)]
        if None in ours or None in theirs:
            sys.exit(1)
        (m_s, v_s), (m_b, v_b) = _mean_var(ours), _mean_var(theirs)
        diff, se = sign * (m_s - m_b), math.sqrt(v_s / RUNS + v_b / RUNS)
        better = diff > 0 and diff > MARGIN_SE * se
        print("%s over %d seeded runs: submission %r (sd %.4g), starter code %r (sd %.4g); %s is better, the bar is "
              "%.4g standard errors (%.4g): %s" % (metric, RUNS, m_s, math.sqrt(v_s), m_b, math.sqrt(v_b), word,
                                                   MARGIN_SE, MARGIN_SE * se,
                                                   "beats the starter code" if better else "does not"))
        print("(MLGym's recorded baseline: %r)" % baseline)
        sys.exit(0 if better else 1)
    second = evaluate(".", *args, SEED_BASE + 1, wrapper=wrapper, label="submission")
    if second is None:
        sys.exit(1)
    if second == first:
        better = sign * (first - baseline) > 0
        print("%s = %r (the same on two seeds), baseline %r (%s is better): %s" % (
            metric, first, baseline, word, "beats the baseline" if better else "does not"))
        sys.exit(0 if better else 1)
    values = [first, second] + [evaluate(".", *args, SEED_BASE + i, wrapper=wrapper, label="submission")
                                for i in range(2, RUNS)]
    if None in values:
        sys.exit(1)
    mean, var = _mean_var(values)
    margin = MARGIN_SE * math.sqrt(var / RUNS)
    better = sign * (mean - baseline) > margin
    print("%s over %d seeded runs: %r (sd %.4g), baseline %r (%s is better), the bar is %.4g standard errors (%.4g)"
          ": %s" % (metric, RUNS, mean, math.sqrt(var), baseline, word, MARGIN_SE, margin,
                    "beats the baseline" if better else "does not"))
    sys.exit(0 if better else 1)
