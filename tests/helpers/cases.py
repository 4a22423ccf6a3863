"""Another module's test cases, for a module that runs them again under other fixtures (test_namespaces_server.py
runs the embedded-pool cases against a Qdrant server).

The module is found by its name anywhere under tests/ and imported as pytest imports it (its own directory first
on sys.path, by that name), so both runs share one module object and its asserts are rewritten; it may move."""

import importlib
import sys
from types import ModuleType

from helpers.paths import FIXTURES, TESTS


def load_cases(name: str) -> ModuleType:
    """The test module `name` (test_pool, ...), wherever it lives under tests/."""
    if name in sys.modules:
        return sys.modules[name]
    found = [p for p in TESTS.rglob(f"{name}.py") if FIXTURES not in p.parents]
    if len(found) != 1:
        raise LookupError(f"{name}.py: {len(found)} files of that name under {TESTS} (want one)")
    folder = str(found[0].parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)
