"""The static scan of carried solution files: every door into the test process, under several spellings, is
flagged; ordinary solutions (the fixtures' reference solutions in six languages, idiomatic snippets) are not."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from mtl_graph.judging.tamper_scan import scan_file, scan_python
from mtl_graph.judging.tamper_scan import test_words as words_of
from helpers.paths import FIXTURES

# Each door, reached with each way of naming a module: import, alias, from-import, dunder import.
DOORS = {
    "exit": ("os", "_exit", "(0)"), "kill": ("os", "kill", "(1, 9)"), "write-fd": ("os", "write", "(1, b'OK')"),
    "modules": ("sys", "modules", "['unittest']"), "frames": ("sys", "_getframe", "(1)"),
    "settrace": ("sys", "settrace", "(None)"), "sys-exit": ("sys", "exit", "(0)"),
}
SPELLINGS = {
    "attribute": "import {m}\n{m}.{a}{call}\n",
    "alias": "import {m} as q\nq.{a}{call}\n",
    "from-import": "from {m} import {a} as z\nz{call}\n",
    "computed-getattr": "import {m}\ngetattr({m}, '{a}'[::-1][::-1]){call}\n",
    "module-as-value": "import {m}\nt = {m}\nt.{a}{call}\n",
    "dunder-import": "__import__('{m}').{a}{call}\n",
}
OTHER_DOORS = [
    "import unittest\nunittest.TestCase.run = lambda *a: None\n",
    "from unittest import mock\n",
    "import _pytest.python\n",
    "import builtins\nbuiltins.print = None\n",
    "import gc\ngc.get_objects()\n",
    "import inspect\ninspect.stack()\n",
    "import ctypes\n",
    "import importlib\nimportlib.import_module('o' + 's')\n",
    "import atexit\n",
    "import signal\n",
    "import pickle\npickle.loads(b'')\n",
    "import types\ntypes.FunctionType(compile('1', 'x', 'eval'), {})\n",
    "from types import CodeType\n",
    "exec('print(1)')\n",
    "eval('1')\n",
    "raise SystemExit(0)\n",
    "exit(0)\n",
    "x = ().__class__.__base__.__subclasses__()\n",
    "f = (lambda: 0).__code__\n",
    "g = (lambda: 0).__globals__\n",
    "vars(object)\n",
    "globals()['x'] = 1\n",
    "open('/proc/self/fd/1', 'w')\n",
    "open(1, 'w')\n",
    "open('report.jsonl', 'a').write('{}')\n",
    "import pathlib\npathlib.Path('test_x.py').write_text('')\n",
    "def f():\n    import os\n    os._exit(0)\nf()\n",
    "setattr(__builtins__, 'x', 1)\n",
    "y = getattr(object, '__subclasses__')\n",
]
BENIGN = [
    "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))\n",
    "import os\nHERE = os.path.dirname(os.path.abspath(__file__))\nNAME = os.environ.get('USER', '')\n",
    "import sys\nsys.setrecursionlimit(10000)\nBIG = sys.maxsize\nsys.stdout.write('')\n",
    "import re\nfrom collections import Counter, defaultdict\nfrom functools import reduce\n",
    "import io\nclass Meter(io.BufferedRandom):\n    pass\nbuf = io.StringIO()\n",
    "import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int = 0\n",
    "class Node:\n    def __eq__(self, other):\n        return self.__dict__ == other.__dict__\n",
    "with open('input.txt') as fh:\n    data = fh.read()\n",
    "def f(name):\n    return open(name, 'r').read()\n",
    "text = 'hello world'.replace('world', 'there')\n",
    "import sys\nif __name__ == '__main__':\n    sys.exit(main())\n",
    "from types import SimpleNamespace\nns = SimpleNamespace(a=1)\n",
    "import json\nprint(json.dumps({'a': 1}))\n",
]
COMPILED = {
    "solution.go": ["func init() { os.Exit(0) }", "import \"syscall\"\nfunc f() { syscall.Exit(0) }",
                    "func init() { os.Args = os.Args[:1] }", "//go:linkname x runtime.y"],
    "src/lib.rs": ["pub fn f() { std::process::exit(0) }", "#[link_section = \".init_array\"]\nstatic X: u8 = 0;",
                   "const T: &str = include_str!(\"../tests/t.rs\");"],
    "two-fer.js": ["process.exit(0);", "process['exit'](0);", "globalThis.expect = () => ({toBe() {}});",
                   "require('child_process').execSync('true');", "Object.prototype.toEqual = 1;",
                   "const m = Symbol.for('$$jest-matchers-object');"],
    "src/main/java/Twofer.java": ["class T { static { System.exit(0); } }", "Runtime.getRuntime().halt(0);",
                                  "import org.junit.jupiter.api.Assertions;", "f.setAccessible(true);"],
    "two_fer.cpp": ["static int x = (std::exit(0), 1);", "#define REQUIRE(x) (void)0",
                    "__attribute__((constructor)) static void f() {}", "int main() { return 0; }"],
}
COMPILED_BENIGN = {
    "solution.go": "package leap\n\n// os.Exit in a comment is fine\nfunc IsLeap(y int) bool { return y%4 == 0 }\n",
    "src/lib.rs": "pub fn twofer(name: &str) -> String { format!(\"One for {name}, one for me.\") }\n",
    "two-fer.js": "export const twoFer = (name = 'you') => `One for ${name}, one for me.`;\n",
    "src/main/java/Twofer.java": "class Twofer { String twofer(String n) { return n == null ? \"you\" : n; } }\n",
    "two_fer.cpp": "#include <string>\n#define MAXLEN 10\nnamespace two_fer { std::string f() { return \"x\"; } }\n",
}


@pytest.mark.parametrize("door, spelling", list(itertools.product(DOORS, SPELLINGS)))
def test_every_door_is_flagged_under_every_spelling(door, spelling):
    module, attr, call = DOORS[door]
    code = SPELLINGS[spelling].format(m=module, a=attr, call=call)
    assert scan_python(code), code


@pytest.mark.parametrize("code", OTHER_DOORS)
def test_other_doors_into_the_test_process_are_flagged(code):
    assert scan_python(code), code


@pytest.mark.parametrize("code", BENIGN)
def test_ordinary_solutions_are_not_flagged(code):
    assert scan_python(code) == []


def test_a_guarded_main_block_never_runs_under_the_tests_and_is_not_scanned():
    assert scan_python("import sys\nif __name__ == '__main__':\n    sys.exit(0)\nelse:\n    sys.exit(1)\n")
    assert scan_python("import sys\nif __name__ == '__main__':\n    sys.exit(0)\n") == []


@pytest.mark.parametrize("rel, code", [(rel, c) for rel, codes in COMPILED.items() for c in codes])
def test_compiled_languages_early_exits_and_framework_reach_are_flagged(rel, code):
    assert scan_file(rel, code, words_of({"t.cpp": "TEST_CASE(\"x\") { REQUIRE(1 == 1); }"})), code


@pytest.mark.parametrize("rel", sorted(COMPILED_BENIGN))
def test_compiled_solutions_are_not_flagged(rel):
    assert scan_file(rel, COMPILED_BENIGN[rel], words_of({"t.cpp": "REQUIRE(x)"})) == []


def test_the_fixture_reference_solutions_of_every_track_are_clean():
    root = FIXTURES / "polyglot"
    files = [p for p in root.glob("*/exercises/practice/*/.meta/**/*") if p.is_file()
             and p.suffix in (".py", ".go", ".rs", ".js", ".java", ".cpp", ".h", ".hpp")]
    assert len({p.relative_to(root).parts[0] for p in files}) == 6
    assert {str(p): scan_file(p.name, p.read_text()) for p in files} == {str(p): [] for p in files}


def test_unparseable_or_unknown_files_are_not_findings():
    assert scan_python("def broken(:\n") == []
    assert scan_file("notes.txt", "os._exit(0)") == []
    assert scan_python("x = " + "(" * 5000 + ")" * 5000) in ([], ["nested too deeply to scan"])
