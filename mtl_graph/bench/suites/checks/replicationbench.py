"""The check of a ReplicationBench task: the answer in submission.json against the expected output ± tolerance.

Stdlib only; the suite appends ``main(TASK_ID, PAYLOAD)`` with ``PAYLOAD = {"expected", "tolerance"}``. Numbers
match within their (absolute) tolerance, lists and tuples element by element, dicts key by key; a single tolerance
applies to every element, as in the benchmark's own scorer.
"""

import ast
import json
import math
import sys


def within(got, want, tol):
    if isinstance(want, bool) or isinstance(got, bool):
        return got == want
    if isinstance(want, (int, float)):
        if not isinstance(got, (int, float)) or not math.isfinite(float(got)):
            return False
        return abs(float(got) - float(want)) <= float(tol if isinstance(tol, (int, float)) else 0.0)
    if isinstance(want, (list, tuple)):
        tols = tol if isinstance(tol, (list, tuple)) else [tol] * len(want)
        return (isinstance(got, (list, tuple)) and len(got) == len(want) and len(tols) == len(want)
                and all(within(g, w, t) for g, w, t in zip(got, want, tols)))
    if isinstance(want, dict):
        def key_tol(k):
            return tol.get(k, 0.0) if isinstance(tol, dict) else tol

        return isinstance(got, dict) and all(k in got and within(got[k], w, key_tol(k)) for k, w in want.items())
    return got == want


def read_submission(path):
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        return json.loads(text)
    except ValueError:
        return ast.literal_eval(text)  # a Python literal ({"a": None}), as the benchmark's own prompt shows


def main(task_id, payload):
    try:
        submission = read_submission("submission.json")
    except FileNotFoundError:
        print("no submission.json in the working directory")
        sys.exit(1)
    except (ValueError, SyntaxError, UnicodeDecodeError) as exc:
        print("submission.json is neither JSON nor a Python literal: %s" % exc)
        sys.exit(1)
    if not isinstance(submission, dict) or submission.get(task_id) is None:
        print("submission.json gives no answer for %r" % task_id)
        sys.exit(1)
    ok = within(submission[task_id], payload["expected"], payload["tolerance"])
    print("%s: answer %r is %s the expected output and its tolerance" % (task_id, submission[task_id],
                                                                     "within" if ok else "outside"))
    sys.exit(0 if ok else 1)
