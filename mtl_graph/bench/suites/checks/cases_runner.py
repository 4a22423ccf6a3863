"""Test-case runner embedded into jsonl-suite checks; it runs in the task's workspace with only the stdlib.

The harness appends one call to ``main(...)``; this file must therefore stay self-contained.
"""

import json
import math
import subprocess
import sys


def _same(got, want):
    if isinstance(want, float) or isinstance(got, float):
        try:
            return math.isclose(float(got), float(want), rel_tol=1e-6, abs_tol=1e-9)
        except (TypeError, ValueError):
            return False
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    return got == want


def _tokens(text):
    return [line.split() for line in text.strip().splitlines() if line.strip()]


def _stdin_case(solution, case, timeout):
    try:
        proc = subprocess.run([sys.executable, solution], input=case["input"], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timed out after %ss" % timeout
    if proc.returncode != 0:
        return "exit code %d: %s" % (proc.returncode, proc.stderr.strip()[-500:])
    if _tokens(proc.stdout) != _tokens(case["output"]):
        return "expected %r, got %r" % (case["output"][:200], proc.stdout[:200])
    return None


def _load_callable(solution, func_name):
    namespace = {"__name__": "__mtl_check__"}
    with open(solution, encoding="utf-8") as fh:
        exec(compile(fh.read(), solution, "exec"), namespace)
    if "Solution" in namespace and hasattr(namespace["Solution"], func_name):
        return getattr(namespace["Solution"](), func_name)
    if func_name in namespace:
        return namespace[func_name]
    raise NameError("%s: no function or Solution method named %r" % (solution, func_name))


def _call_case(fn, case):
    # LiveCodeBench encodes one JSON value per argument, one per line.
    args = [json.loads(line) for line in case["input"].splitlines() if line.strip()]
    want = json.loads(case["output"])
    try:
        got = fn(*args)
    except Exception as exc:  # a crash is a failed case, not a crashed check
        return "raised %s: %s" % (type(exc).__name__, exc)
    if not _same(got, want):
        return "expected %r, got %r" % (want, got)
    return None


def main(cases, solution, func_name=None, timeout=10.0):
    fn = None
    if func_name:
        try:
            fn = _load_callable(solution, func_name)
        except Exception as exc:
            print("could not load solution: %s: %s" % (type(exc).__name__, exc))
            sys.exit(1)
    failed = 0
    for n, case in enumerate(cases, 1):
        error = _call_case(fn, case) if fn else _stdin_case(solution, case, timeout)
        if error:
            failed += 1
            print("case %d failed: %s" % (n, error))
    print("%d/%d cases passed" % (len(cases) - failed, len(cases)))
    sys.exit(1 if failed else 0)
