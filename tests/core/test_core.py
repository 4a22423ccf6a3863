"""The core package: shared types that import nothing else of ours, one error base, typed run errors."""

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import mtl_graph
from mtl_graph.core import ErrorKind, MTLError, RunError, error_kind_of
from mtl_graph.core.errors import failure


def test_core_imports_nothing_else_of_ours():
    code = ("import sys, mtl_graph.core; "
            "print(sorted(m for m in sys.modules if m.startswith('mtl_graph') and not m.startswith('mtl_graph.core')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['mtl_graph']"


def _our_exceptions():
    for info in pkgutil.walk_packages(mtl_graph.__path__, "mtl_graph."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra (live tier, bench) not installed: nothing of it can raise
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Exception) and cls.__module__ == module.__name__:  # not KeyboardInterrupt kin
                yield cls


def test_every_error_we_define_derives_from_one_base():
    found = sorted({c for c in _our_exceptions()}, key=lambda c: c.__qualname__)
    assert len(found) >= 25  # the package's error classes, all of them (a new one is checked without listing it)
    assert [c.__qualname__ for c in found if not issubclass(c, MTLError)] == []


def test_an_error_keeps_its_builtin_base():
    from mtl_graph.core.task import TaskError
    from mtl_graph.memory.errors import PoolError
    from mtl_graph.sandbox.tree import TreeMoved

    assert issubclass(TaskError, ValueError) and issubclass(PoolError, RuntimeError) and issubclass(TreeMoved, OSError)


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_a_run_error_round_trips_through_its_text(kind):
    error = RunError(kind=kind, detail="something specific went wrong")
    update = failure(kind, "something specific went wrong")
    assert update == {"error": error.text, "error_kind": kind.value} and str(error) == error.text
    if kind in (ErrorKind.INVALID_TASK, ErrorKind.RETRIEVAL, ErrorKind.MODEL, ErrorKind.CHECK, ErrorKind.AGENT,
                ErrorKind.WRITE_BACK, ErrorKind.REFUSED, ErrorKind.INVALID_SETTINGS):
        assert error_kind_of(error.text) is kind  # a logged run without a kind is still classified


def test_untyped_error_text_is_classified_conservatively():
    assert error_kind_of(None) is None and error_kind_of("") is None
    assert error_kind_of("execute raised KeyError: 'x'") is ErrorKind.CRASHED
    assert error_kind_of("something nobody prefixed") is ErrorKind.OTHER
