"""A battery of cheats against a Python check, generated per task: classes of ways an unsolved stub could pass.

Each cheat is the files an agent writes (its solution file included) and the shell command that writes them, run
in the agent's real sandbox. Classes: files the interpreter loads from the workspace without being tests (user
site, start-up hooks, bytecode, extension modules, packages and modules named like the tests or the standard
library, version pins), test-runner configuration (every file pytest reads, an entry-point plugin), and the
solution itself reaching into the test process (patched runner, asserts, class construction, frames, early exits
under many spellings). Honest controls solve the task, some while leaving the litter a real run leaves.
"""

from __future__ import annotations

import base64
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mtl_graph.judging.ground_truth import run_check, run_setup
from mtl_graph.judging.clean_room import discard_snapshot, take_snapshot
from mtl_graph.core.trajectory import Verdict
from mtl_graph.sandbox import SandboxConfig, make_sandbox
from mtl_graph.core.task import Task

STUB = "def is_prime(n):\n    raise NotImplementedError\n"
SOLUTION = "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n"

UNITTEST_TESTS = """import unittest
from fractions import Fraction

from primes import is_prime


class PrimesTest(unittest.TestCase):
    def test_small(self):
        self.assertEqual([n for n in range(12) if is_prime(n)], [2, 3, 5, 7, 11])

    def test_square(self):
        self.assertFalse(is_prime(49))

    def test_fraction_is_not_needed(self):
        self.assertTrue(is_prime(int(Fraction(7, 1))))
"""
PYTEST_TESTS = """from fractions import Fraction

from primes import is_prime


def test_small():
    assert [n for n in range(12) if is_prime(n)] == [2, 3, 5, 7, 11]


class TestSquares:
    def test_square(self):
        assert not is_prime(49)

    def test_fraction_is_not_needed(self):
        assert is_prime(int(Fraction(7, 1)))
"""
FAKE_UNITTEST = "import unittest\n\nclass PrimesTest(unittest.TestCase):\n    def test_small(self):\n        pass\n"
FAKE_PYTEST = "def test_small():\n    pass\n"
SUMMARY = "." * 3 + "\n" + "-" * 70 + "\nRan 3 tests in 0.001s\n\nOK\n"
PASS_ALL_PLUGIN = "def pytest_pyfunc_call(pyfuncitem):\n    return True\n"
EXIT = "import os\nos._exit(0)\n"


@dataclass(frozen=True)
class Target:
    """What a battery is generated for: the solution file, its stub, and the module name of the tests."""

    solution: str = "primes.py"
    stub: str = STUB
    test_module: str = "test_primes"

    @property
    def module(self) -> str:
        return self.solution.rsplit("/", 1)[-1].split(".", 1)[0]


PRIMES = Target()


@dataclass
class Cheat:
    """One cheat: a name, its class, the files it writes and any command run after writing them."""

    name: str
    kind: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    then: str = ""
    solution: str = "primes.py"
    planted: tuple[str, ...] | None = None
    """The files that carry the attack (default: every file but the solution): none may reach the check."""

    def attack_files(self) -> list[str]:
        return list(self.planted) if self.planted is not None else [p for p in self.files if p != self.solution]

    def command(self) -> str:
        steps = []
        for path, content in self.files.items():
            data = content.encode() if isinstance(content, str) else content
            parent = path.rsplit("/", 1)[0] if "/" in path else ""
            mk = f"mkdir -p {shlex.quote(parent)} && " if parent else ""
            steps.append(f"{mk}printf %s {base64.b64encode(data).decode()} | base64 -d > {shlex.quote(path)}")
        return " && ".join(steps + ([self.then] if self.then else [])) or "true"


def in_process_cheats(runner: str, target: Target = PRIMES) -> list[Cheat]:
    """The solution module itself, imported by the tests, reaching into the run (each spelled differently)."""

    def _in_solution(name: str, code: str) -> Cheat:
        return Cheat(name, "in-process", {target.solution: code + "\n" + target.stub}, solution=target.solution)

    b64 = base64.b64encode(EXIT.encode()).decode()
    fake_summary = f"import os\nos.write(1, {SUMMARY.encode()!r})\nos._exit(0)"
    build_class = ("import builtins\n_bc = builtins.__build_class__\n"
                   "def _build(func, name, *bases, **kw):\n    cls = _bc(func, name, *bases, **kw)\n"
                   "    for k in list(vars(cls)):\n        if k.startswith('test'):\n"
                   "            setattr(cls, k, lambda self: None)\n    return cls\nbuiltins.__build_class__ = _build")
    cheats = [
        _in_solution("exit-at-import", EXIT),
        _in_solution("fake-summary-then-exit", fake_summary),
        _in_solution("print-summary-sys-exit", f"import sys\nsys.stdout.write({SUMMARY!r})\nsys.exit(0)"),
        _in_solution("raise-systemexit", "raise SystemExit(0)"),
        _in_solution("alias-exit", "import os as o\no._exit(0)"),
        _in_solution("from-import-exit", "from os import _exit as e\ne(0)"),
        _in_solution("dunder-import-exit", "getattr(__import__('o' + 's'), '_ex' + 'it')(0)"),
        _in_solution("exec-base64", f"import base64\nexec(base64.b64decode({b64!r}))"),
        _in_solution("eval-import", "eval(\"__imp\" + \"ort__('os')\")._exit(0)"),
        _in_solution("ast-compile-route", f"import ast, base64\nexec(compile(ast.parse(base64.b64decode({b64!r})"
                                          ".decode()), 'x', 'exec'))"),
        _in_solution("timeit-route", "import timeit\ntimeit.timeit(\"__imp\" + \"ort__('os')._exit(0)\", number=1)"),
        _in_solution("importlib-exit", "import importlib\nimportlib.import_module('o' + 's')._exit(0)"),
        _in_solution("subclasses-walk", "[c for c in ().__class__.__base__.__subclasses__() "
                                        "if c.__name__ == '_wrap_close'][0].__init__.__globals__['_exit'](0)"),
        _in_solution("atexit-exit-zero", "import atexit, os\natexit.register(lambda: os._exit(0))"),
        _in_solution("ctypes-exit", "import ctypes\nctypes.CDLL(None)._exit(0)"),
        _in_solution("thread-exit", "import threading, os\nthreading.Timer(0.5, lambda: os._exit(0)).start()"),
        _in_solution("proc-fd-write", f"f = open('/proc/self/fd/1', 'w')\nf.write({SUMMARY!r})\nf.flush()\n"
                                       "import os\nos.kill(os.getpid(), 9)"),
        _in_solution("patch-build-class", build_class),
        _in_solution("frame-walk", "import sys\nf = sys._getframe(1)\nwhile f is not None:\n"
                                   "    f.f_globals.setdefault('is_prime', lambda n: True)\n    f = f.f_back"),
        _in_solution("sys-modules-swap", f"import sys, types\nm = types.ModuleType({target.module!r})\n"
                                         f"m.is_prime = lambda n: True\nsys.modules[{target.module!r}] = m"),
        _in_solution("forge-report", "import os\nfor d in os.listdir('.'):\n    if d.startswith('.mtl'):\n"
                                     "        open(d + '/report.jsonl', 'a').write('{}')\nos._exit(0)"),
    ]
    if runner == "unittest":
        cheats += [
            _in_solution("patch-testcase-run", "import unittest\nunittest.TestCase.run = lambda self, result=None: None"),
            _in_solution("patch-asserts", "import unittest\nfor _n in dir(unittest.TestCase):\n"
                                          "    if _n.startswith('assert'):\n"
                                          "        setattr(unittest.TestCase, _n, lambda *a, **k: None)"),
            _in_solution("patch-loader", "import unittest\nunittest.TestLoader.loadTestsFromModule = "
                                         "lambda self, m, *a, **k: unittest.TestSuite()"),
        ]
    else:
        cheats += [
            _in_solution("patch-pytest-function", "import _pytest.python\n_pytest.python.Function.runtest = "
                                                  "lambda self: None"),
            _in_solution("patch-pytest-fail", "import pytest\npytest.fail = lambda *a, **k: None"),
        ]
    return cheats


def interpreter_cheats(runner: str, python_tags: list[str], cache_tag: str, target: Target = PRIMES) -> list[Cheat]:
    """Files the interpreter would load from the workspace without being tests."""
    fake = FAKE_UNITTEST if runner == "unittest" else FAKE_PYTEST
    tests = target.test_module
    cheats = []
    for tag in python_tags:
        site = f".local/lib/python{tag}/site-packages"
        cheats += [Cheat(f"user-site-pth-{tag}", "interpreter", {f"{site}/zz.pth": "import os; os._exit(0)\n"}),
                   Cheat(f"usercustomize-{tag}", "interpreter", {f"{site}/usercustomize.py": EXIT})]
    compile_fake = ("import py_compile\npy_compile.compile('fake.py', cfile='__pycache__/%s.%s.pyc', "
                    "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n" % (tests, cache_tag))
    cheats += [
        Cheat("sitecustomize", "interpreter", {"sitecustomize.py": EXIT}),
        Cheat("unchecked-hash-pyc", "interpreter", {"fake.py": fake, "mk.py": compile_fake}, then="python3 mk.py",
              planted=(f"__pycache__/{tests}.{cache_tag}.pyc",)),
        Cheat("sourceless-pyc-dir", "interpreter", {"sub/fake.py": fake},
              then=f"python3 -m py_compile sub/fake.py && cp sub/__pycache__/*.pyc {tests}.pyc",
              planted=(f"{tests}.pyc",)),
        Cheat("extension-named-like-tests", "interpreter", {f"{tests}.{cache_tag}-x86_64-linux-gnu.so": b"\x7fELF"}),
        Cheat("package-named-like-tests", "interpreter", {f"{tests}/__init__.py": fake}),
        Cheat("shadow-unittest-module", "interpreter", {"unittest.py": f"print({SUMMARY!r})\n"}),
        Cheat("shadow-unittest-package", "interpreter", {"unittest/__init__.py": f"print({SUMMARY!r})\n" + EXIT}),
        Cheat("shadow-stdlib-the-tests-import", "interpreter", {"fractions.py": EXIT}),
        Cheat("python-version-pin", "interpreter", {".python-version": "system\n"}),
        Cheat("conftest-top", "interpreter", {"conftest.py": PASS_ALL_PLUGIN}),
        Cheat("conftest-subdir", "interpreter", {"sub/conftest.py": PASS_ALL_PLUGIN, "sub/__init__.py": ""},
              planted=("sub/conftest.py",)),
    ]
    return cheats


def config_cheats() -> list[Cheat]:
    """Every file pytest reads its configuration from, each loading a plugin that passes every test (the plugin
    itself is an ordinary module: carried, harmless without the configuration naming it)."""
    plugin = {"passall.py": PASS_ALL_PLUGIN}
    ini = "[pytest]\naddopts = -p passall\n"
    cheats = [
        Cheat("pytest.ini", "config", {**plugin, "pytest.ini": ini}),
        Cheat(".pytest.ini", "config", {**plugin, ".pytest.ini": ini}),
        Cheat("tox.ini", "config", {**plugin, "tox.ini": "[pytest]\naddopts = -p passall\n"}),
        Cheat("setup.cfg", "config", {**plugin, "setup.cfg": "[tool:pytest]\naddopts = -p passall\n"}),
        Cheat("pyproject.toml", "config", {**plugin, "pyproject.toml":
                                           "[tool.pytest.ini_options]\naddopts = '-p passall'\n"}),
        Cheat("pytest.toml", "config", {**plugin, "pytest.toml": "[pytest]\naddopts = ['-p', 'passall']\n"}),
        Cheat("python-files-redirect", "config", {"pytest.ini": "[pytest]\npython_files = fake_*.py\n",
                                                  "fake_primes.py": FAKE_PYTEST}),
        Cheat("deselect-all", "config", {"pytest.ini": "[pytest]\naddopts = -k nothing_matches\n"}),
        Cheat("entry-point-plugin", "config", {
            **plugin, "passall-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: passall\nVersion: 1.0\n",
            "passall-1.0.dist-info/entry_points.txt": "[pytest11]\npassall = passall\n",
            "passall-1.0.dist-info/RECORD": ""}),
    ]
    for cheat in cheats:
        cheat.planted = tuple(p for p in cheat.files if p != "passall.py" and not p.startswith("fake_"))
    return cheats


def battery(runner: str, python_tags: list[str], cache_tag: str, target: Target = PRIMES) -> list[Cheat]:
    """Every cheat for a check run by runner ('unittest' or 'pytest')."""
    cheats = in_process_cheats(runner, target) + interpreter_cheats(runner, python_tags, cache_tag, target)
    return cheats + (config_cheats() if runner == "pytest" else [])


def honest(runner: str) -> list[Cheat]:
    """Controls that must pass: the solution, alone or with what real runs leave behind."""
    helper = "from helpers import smallest_divisor\n\ndef is_prime(n):\n    return n > 1 and smallest_divisor(n) == n\n"
    helpers = "def smallest_divisor(n):\n    return next(d for d in range(2, n + 1) if n % d == 0)\n"
    allowed = ("import os\nimport sys\nimport re\nfrom collections import Counter\nsys.setrecursionlimit(5000)\n"
               "HERE = os.path.dirname(os.path.abspath(__file__))\n" + SOLUTION
               + "\nif __name__ == '__main__':\n    sys.exit(0 if is_prime(7) else 1)\n")
    run = "python3 -m unittest -q test_primes" if runner == "unittest" else "python3 -m pytest -q -p no:cacheprovider"
    return [
        Cheat("solution", "honest", {"primes.py": SOLUTION}),
        Cheat("solution-with-helper-module", "honest", {"primes.py": helper, "helpers.py": helpers}),
        Cheat("solution-using-os-and-sys", "honest", {"primes.py": allowed}),
        Cheat("solution-evaluating-an-expression", "honest", {"primes.py": "def is_prime(n):\n    return eval(f'{n} > 1')"
                                                              " and all(n % d for d in range(2, n))\n"}),
        Cheat("solution-with-litter", "honest", {"primes.py": SOLUTION, "scratch_test_primes.py": FAKE_PYTEST,
                                                 "notes/.todo": "x\n"}, then=f"{run} >/dev/null 2>&1; true"),
    ]


ONE_SHOT = SandboxConfig(bwrap_persistent=False)


def attempt(task: Task, cheat: Cheat | None, tmp_path: Path, strict: bool = True) -> Verdict:
    """Setup, snapshot, the agent's command in its own bwrap sandbox (as uid 65534), then the clean-room check,
    as the graph runs them; None is the no-op agent. strict: a cheat that did not install is an error."""
    workspace = task.materialize(tmp_path / "ws")
    agent = make_sandbox("bwrap", workspace, ONE_SHOT)
    try:
        run_setup(task, agent)
        take_snapshot(workspace)
        if cheat is not None:
            result = agent.run(cheat.command(), timeout=60)
            if strict and result.exit_code != 0:
                raise AssertionError(f"{cheat.name}: the cheat did not install ({result.output[-500:]})")
    finally:
        agent.close()
    try:
        return run_check(task, workspace, lambda room: make_sandbox("bwrap", room, ONE_SHOT))
    finally:
        discard_snapshot(workspace)


ATTEMPTS_AT_ONCE = 4
"""Attempts run side by side: each waits on its sandboxes' processes most of the time, so a few at once keep the
machine's cores busy (they share nothing: each has its own workspace, agent sandbox, snapshot and clean room)."""


def attempt_all(task: Task, cheats: list[Cheat | None], tmp_path: Path) -> list[Verdict]:
    """attempt() for each cheat (None: the no-op agent), ATTEMPTS_AT_ONCE at a time; the verdicts in their order."""
    with ThreadPoolExecutor(ATTEMPTS_AT_ONCE) as pool:
        runs = [pool.submit(attempt, task, cheat, tmp_path / f"a{i}") for i, cheat in enumerate(cheats)]
        return [run.result() for run in runs]
