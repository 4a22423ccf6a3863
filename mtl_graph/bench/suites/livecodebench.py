"""LiveCodeBench code generation, read from its released JSON-lines files (``test.jsonl`` ... ``test6.jsonl``).

Spec: ``livecodebench:PATH``, PATH one release file (.jsonl or .jsonl.gz) or the directory holding them (every
``*.jsonl`` in it, release v6 being all six). A problem has ``question_content``, ``starter_code``,
``public_test_cases`` and ``private_test_cases`` (JSON strings of ``{input, output, testtype}``), and ``metadata``
(a JSON string; ``func_name`` for a functional problem). The release stores large private test sets compressed:
base64 of zlib of a *pickled* JSON string. Unpickling untrusted data can run code, so the pickle is never loaded:
its opcodes are read (pickletools) and only a pickle that is one plain string is accepted.

The public tests are in the workspace (``public_tests.json``) and in the instruction; every test, public and
private, is graded by a check whose cases never enter the workspace (hidden.packed_check): inline in the check's
stdin script, or, for a test set too large for a command line (common in the release), a check-only file of the
clean room. The check grades as LiveCodeBench's own grader does (checks/livecodebench.py): stdin output line by
line, numbers as exact decimals (``3.0`` is ``3``); a function's result with ``==``, a returned tuple as a list.
"""

from __future__ import annotations

import base64
import binascii
import json
import pickletools
import zlib
from pathlib import Path
from typing import Any

from mtl_graph.bench.suites.base import REFERENCE_UNAVAILABLE_KEY, SkippedTask, Suite, SuiteError, \
    read_json_objects, sample
from mtl_graph.bench.suites.hidden import TaskSkip, packed_check, script
from mtl_graph.core.task import Task

DOMAIN = "livecodebench"
SOLUTION_FILE = "solution.py"
PUBLIC_TESTS_FILE = "public_tests.json"
TESTTYPES = ("stdin", "functional")
MAX_DECOMPRESSED = 512 * 1024 * 1024
"""Bytes a compressed test set may inflate to (a guard against a zlib bomb)."""
_STRING_OPS = {"PROTO", "FRAME", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "MEMOIZE", "BINPUT",
               "LONG_BINPUT", "PUT", "STOP"}
_SHOWN_CASES = 3
# LiveCodeBench runs every solution after these imports (its grader prepends them), so starter code may use
# `List` or `deque` unimported; the check does the same.
_PRELUDE_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
                    "statistics", "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")
PRELUDE = ("".join(f"from {m} import *\n" for m in _PRELUDE_MODULES)
           + "".join(f"import {m}\n" for m in _PRELUDE_MODULES if m not in ("builtins", "typing"))
           + "sys.setrecursionlimit(50000)\n")
_CALL = """\
import os as _os, tempfile as _tempfile
with open({file!r}, encoding="utf-8") as _fh:
    _source = _fh.read()
_fd, _program = _tempfile.mkstemp(suffix=".py")
_os.write(_fd, ({prelude!r} + _source).encode("utf-8"))
_os.close(_fd)
main(PAYLOAD, _program, {fn!r}, 10.0)
"""

_STDIN_NOTE = ("Write a complete Python program in `{file}` that reads the input from standard input and writes "
               "the answer to standard output.")
_CALL_NOTE = ("Complete `{fn}` in `{file}` (it holds the starter code); it is called with each test's inputs "
              "and its return value is compared with the expected output.")
_TESTS_NOTE = ("Public tests ({n}, all in `{tests}`; more tests are hidden and graded after you finish):\n\n{shown}")


def unpickle_string(data: bytes, where: str) -> str:
    """The string a pickle holds, read from its opcodes without executing it; anything else is a SuiteError."""
    try:
        ops = list(pickletools.genops(data))
    except (ValueError, EOFError) as exc:  # genops' own errors for a truncated or malformed pickle
        raise SuiteError(f"{where}: compressed test cases are not a valid pickle ({exc})") from None
    if bad := sorted({op.name for op, _, _ in ops} - _STRING_OPS):
        raise SuiteError(f"{where}: compressed test cases hold a pickle that is not a plain string (opcodes "
                         f"{', '.join(bad)}); refusing to unpickle untrusted data")
    strings = [arg for op, arg, _ in ops if op.name.endswith("UNICODE")]
    if len(strings) > 1:
        raise SuiteError(f"{where}: compressed test cases hold more than one string")
    text = strings[0] if strings else None
    if text is None:
        raise SuiteError(f"{where}: compressed test cases hold no string")
    return text


def _inflate(blob: str, where: str) -> str:
    try:
        raw = base64.b64decode(blob.encode("ascii"), validate=True)
        inflater = zlib.decompressobj()
        data = inflater.decompress(raw, MAX_DECOMPRESSED)
    except (binascii.Error, UnicodeEncodeError, zlib.error):
        raise SuiteError(f"{where}: private_test_cases is neither JSON nor base64 of zlib data") from None
    if inflater.unconsumed_tail:
        raise SuiteError(f"{where}: compressed test cases inflate past {MAX_DECOMPRESSED // 2**20} MiB")
    return unpickle_string(data, where)


def decode_cases(value: Any, key: str, where: str) -> list[dict[str, str]]:
    """Test cases from a field: a list, a JSON string of one, or (private tests) the compressed form."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            if key != "private_test_cases":
                raise SuiteError(f"{where}: {key} is not valid JSON") from None
            try:
                value = json.loads(_inflate(value, where))
            except json.JSONDecodeError:
                raise SuiteError(f"{where}: decompressed {key} is not valid JSON") from None
    if value is None:
        value = []
    if not isinstance(value, list):
        raise SuiteError(f"{where}: {key} must be a list of test cases")
    cases = []
    for case in value:
        if not (isinstance(case, dict) and isinstance(case.get("input"), str) and isinstance(case.get("output"), str)):
            raise SuiteError(f"{where}: each test case in {key} needs string 'input' and 'output'")
        testtype = case.get("testtype", "stdin")
        if testtype not in TESTTYPES:
            raise SuiteError(f"{where}: unknown testtype {testtype!r} in {key} (expected {' or '.join(TESTTYPES)})")
        cases.append({"input": case["input"], "output": case["output"], "testtype": testtype})
    return cases


def _metadata(item: dict, where: str) -> dict:
    meta = item.get("metadata") or {}
    if isinstance(meta, str):
        try:
            meta = json.loads(meta) if meta.strip() else {}
        except json.JSONDecodeError:
            raise SuiteError(f"{where}: metadata is not valid JSON") from None
    if not isinstance(meta, dict):
        raise SuiteError(f"{where}: metadata must be a JSON object")
    return meta


def _shown(cases: list[dict[str, str]]) -> str:
    parts = [f"Input:\n```\n{c['input'].rstrip()}\n```\nExpected output:\n```\n{c['output'].rstrip()}\n```"
             for c in cases[:_SHOWN_CASES]]
    return "\n\n".join(parts)


def problem_to_task(item: dict, where: str) -> Task:
    """The task of one problem; a problem this machine cannot grade safely raises TaskSkip."""
    pid, statement = item.get("question_id"), item.get("question_content")
    if not pid or not isinstance(statement, str) or not statement.strip():
        raise SuiteError(f"{where}: a problem needs question_id and question_content")
    public = decode_cases(item.get("public_test_cases"), "public_test_cases", where)
    private = decode_cases(item.get("private_test_cases"), "private_test_cases", where)
    cases = public + private
    if not cases:
        raise SuiteError(f"{where}: problem {pid} has no test cases")
    types = {c["testtype"] for c in cases}
    fn = _metadata(item, where).get("func_name")
    if types == {"functional"} and not fn:
        raise SuiteError(f"{where}: functional tests need metadata.func_name")
    if len(types) > 1:
        raise SuiteError(f"{where}: problem {pid} mixes stdin and functional tests")
    fn = fn if types == {"functional"} else None
    payload = [{"input": c["input"], "output": c["output"]} for c in cases]
    check = packed_check(script("livecodebench.py"), payload, _CALL.format(file=SOLUTION_FILE, prelude=PRELUDE, fn=fn))
    note = _CALL_NOTE.format(fn=fn, file=SOLUTION_FILE) if fn else _STDIN_NOTE.format(file=SOLUTION_FILE)
    title = item.get("question_title")
    tests = _TESTS_NOTE.format(n=len(public), tests=PUBLIC_TESTS_FILE, shown=_shown(public)) if public else ""
    return Task(
        id=f"{DOMAIN}/{pid}",
        instruction="\n\n".join(p for p in (f"# {title}" if title else "", statement.strip(), note, tests) if p),
        domain=DOMAIN,
        files={SOLUTION_FILE: item.get("starter_code") or "", PUBLIC_TESTS_FILE: json.dumps(public, indent=1)},
        **check.task_fields(),
        solution_files=[SOLUTION_FILE],
        check_timeout=60.0 + 10.0 * len(cases),
        metadata={"suite": DOMAIN, "mode": "functional" if fn else "stdin", "public_tests": len(public),
                  "hidden_tests": len(private), REFERENCE_UNAVAILABLE_KEY: "LiveCodeBench releases no reference "
                  "solutions", **{k: item[k] for k in ("difficulty", "platform", "contest_date") if k in item}},
    )


def release_files(root: Path) -> list[Path]:
    """The release files a spec names: the file itself, or every .jsonl / .jsonl.gz in the directory."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise SuiteError(f"livecodebench data not found: {root}")
    files = sorted(p for p in root.iterdir() if p.is_file() and p.name.endswith((".jsonl", ".jsonl.gz")))
    if not files:
        raise SuiteError(f"{root}: no .jsonl release files (test.jsonl ... test6.jsonl)")
    return files


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``livecodebench:PATH``: a release file or the directory of them."""
    if not arg:
        raise SuiteError("suite 'livecodebench' needs a path: livecodebench:PATH (test6.jsonl or its directory)")
    items = [(item, f"{path}:{lineno}") for path in release_files(Path(arg).expanduser())
             for item, lineno in read_json_objects(path)]
    tasks, skipped = [], []
    for item, where in items:  # every line is validated, so a corrupt file fails the same way at any --limit
        try:
            tasks.append(problem_to_task(item, where))
        except TaskSkip as exc:
            skipped.append(SkippedTask(id=f"{DOMAIN}/{item.get('question_id')}", reason=str(exc)))
    return Suite(spec=f"livecodebench:{arg}", name=DOMAIN, tasks=sample(tasks, limit, seed), skipped=skipped,
                 total=len(items))
