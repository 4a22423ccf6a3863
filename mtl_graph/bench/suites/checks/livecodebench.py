"""The check of a LiveCodeBench problem, grading as the benchmark's own grader does; stdlib only.

The suite appends ``main(PAYLOAD, program, func_name, timeout)``; this file must therefore stay self-contained.

What a case's answer must be (LiveCodeBench's evaluation semantics, reproduced, not its code):

- stdin problems: the program runs as ``__main__`` and a SystemExit it raises is no failure (the grader calls it in
  its own process and catches it); both outputs are stripped, split at newlines and each line stripped (so trailing
  spaces, a trailing newline or CRLF endings never matter, but a blank line inside the output does); the line counts
  must be equal, and each line pair equal as text, or else as numbers: every whitespace-separated token of both
  lines read as an exact decimal, and the two token lists equal. ``3.0`` is ``3`` and ``1e2`` is ``100``;
  ``0.30000001`` is not ``0.3`` (no tolerance), and a line with a word in it must match as text.
- functional problems: the expected output is the JSON value; the returned value is compared with ``==``, a
  returned tuple first made a list (JSON has no tuples). Nothing else is converted: no float tolerance, and a
  tuple nested inside the result stays a tuple.
"""

import decimal
import json
import subprocess
import sys

_SHOWN = 200


def stripped_lines(text):
    """The lines of an output as the grader compares them (outer blank lines dropped, each line stripped)."""
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line):
    try:
        return [decimal.Decimal(token) for token in line.split()]
    except (decimal.InvalidOperation, ValueError):
        return None


def stdout_mismatch(got, want):
    """Why an output is not the expected one, or None when it is."""
    got_lines, want_lines = stripped_lines(got), stripped_lines(want)
    if len(got_lines) != len(want_lines):
        return "%d lines of output, expected %d" % (len(got_lines), len(want_lines))
    for n, (g, w) in enumerate(zip(got_lines, want_lines), 1):
        if g == w:
            continue
        g_num, w_num = _decimals(g), _decimals(w)
        try:
            same = g_num is not None and w_num is not None and g_num == w_num
        except decimal.InvalidOperation:  # a signalling NaN refuses comparison: the grader counts it wrong
            same = False
        if not same:
            return "line %d is %r, expected %r" % (n, g[:_SHOWN], w[:_SHOWN])
    return None


def value_mismatch(got, want):
    """Why a returned value is not the expected one, or None when it is."""
    if isinstance(got, tuple):
        got = list(got)
    try:
        same = got == want
    except Exception as exc:  # a returned object whose __eq__ raises is a wrong answer, not a crashed check
        return "comparing the result raised %s: %s" % (type(exc).__name__, exc)
    return None if same is True else "expected %r, got %r" % (want, got)


# The grader calls the program in its own process and catches SystemExit: `exit(1)` after the answer is no failure.
_RUN_PROGRAM = """\
import runpy, sys
sys.argv = [sys.argv[1]]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
"""


def _stdin_case(program, case, timeout):
    try:
        proc = subprocess.run([sys.executable, "-c", _RUN_PROGRAM, program], input=case["input"],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timed out after %ss" % timeout
    if proc.returncode != 0:
        return "exit code %d: %s" % (proc.returncode, proc.stderr.strip()[-500:])
    return stdout_mismatch(proc.stdout, case["output"])


def _load_callable(program, func_name):
    namespace = {"__name__": "__mtl_check__"}
    with open(program, encoding="utf-8") as fh:
        exec(compile(fh.read(), program, "exec"), namespace)
    if "Solution" in namespace and hasattr(namespace["Solution"], func_name):
        return getattr(namespace["Solution"](), func_name)
    if func_name in namespace:
        return namespace[func_name]
    raise NameError("no function or Solution method named %r" % func_name)


def _call_case(fn, case):
    # One JSON value per argument, one per line (a blank line, say a trailing newline, is no argument).
    args = [json.loads(line) for line in case["input"].split("\n") if line.strip()]
    try:
        got = fn(*args)
    except Exception as exc:  # a crash is a failed case, not a crashed check
        return "raised %s: %s" % (type(exc).__name__, exc)
    return value_mismatch(got, json.loads(case["output"]))


def main(cases, program, func_name=None, timeout=10.0):
    fn = None
    if func_name:
        try:
            fn = _load_callable(program, func_name)
        except Exception as exc:
            print("could not load solution: %s: %s" % (type(exc).__name__, exc))
            sys.exit(1)
    failed = 0
    for n, case in enumerate(cases, 1):
        error = _call_case(fn, case) if fn else _stdin_case(program, case, timeout)
        if error:
            failed += 1
            print("case %d failed: %s" % (n, error))
    print("%d/%d cases passed" % (len(cases) - failed, len(cases)))
    sys.exit(1 if failed else 0)
