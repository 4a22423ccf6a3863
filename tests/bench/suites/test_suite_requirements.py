"""Suites' package checks: PEP 508 requirements held against what the checks' own interpreter has installed.

A real virtual environment, made from the local checks' interpreter, holds distributions of our own (a
``.dist-info`` with its METADATA, which importlib.metadata reads as pip would have left it); it is first on PATH,
so it is the interpreter the local sandbox's checks run and the one the probe asks. The interpreter tests put a
python3 the sandbox cannot run first on PATH and show that the probe and the check both pass it over.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from mtl_graph.bench.suites import hidden
from mtl_graph.judging.check_env import graded_command
from mtl_graph.sandbox import interpreter, make_sandbox
from mtl_graph.sandbox.bwrap import BwrapSandbox

pytestmark = pytest.mark.filterwarnings("ignore:local sandbox:RuntimeWarning")

DIST = "mtl-probe-dist"
EXTRA_DEP = "mtl-probe-extra-dep"


@pytest.fixture(autouse=True)
def _fresh_interpreters():
    interpreter.clear_cache()
    yield
    interpreter.clear_cache()


def _world_dir() -> Path:
    """A directory the sandbox's unprivileged uid may enter (pytest's own tmp root is private to us)."""
    path = Path(tempfile.mkdtemp(prefix="mtl-req-test-"))
    path.chmod(0o755)
    return path


def _dist(site: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             *[f"Provides-Extra: {e}" for e in ("fast",) if requires], *[f"Requires-Dist: {r}" for r in requires]]
    (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (info / "RECORD").write_text("", encoding="utf-8")


@pytest.fixture
def venv(monkeypatch):
    """A venv first on PATH, the local checks' interpreter; yields (its python, its site-packages)."""
    base = interpreter.check_python("local")
    if base is None:
        pytest.skip("no python3 the local sandbox's checks can run")
    root = _world_dir()
    try:
        made = subprocess.run([base, "-m", "venv", "--without-pip", str(root / "venv")], capture_output=True,
                              text=True, timeout=120)
        if made.returncode != 0:
            pytest.skip(f"{base} cannot make a virtual environment: {made.stderr.strip()[-200:]}")
        [site] = (root / "venv").glob("lib/python3*/site-packages")
        monkeypatch.setenv("PATH", f"{root / 'venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setattr(hidden, "PROBE_SANDBOX", "local")
        interpreter.clear_cache()
        python = interpreter.check_python("local")
        assert python == str(root / "venv" / "bin" / "python3")
        yield python, site
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_specifiers_are_held_against_the_installed_version(venv):
    python, site = venv
    _dist(site, DIST, "1.17.1")
    assert hidden.python_reason([f"{DIST}>=1.4"], "t") is None
    assert hidden.python_reason([f"{DIST}>=1.4,<2", f"{DIST.upper().replace('-', '_')}==1.17.*"], "t") is None
    reason = hidden.python_reason([f"{DIST}>=99", "mtl-probe-absent"], "the dependencies of p")
    assert reason == (f"needs Python packages {DIST}>=99 (installed: 1.17.1), mtl-probe-absent in {python} "
                      "(the dependencies of p)")


def test_generated_specifiers_agree_with_the_installed_versions(venv):
    python, site = venv
    rng = random.Random(30)
    versions = {f"mtl-gen-{i}": f"{rng.randint(0, 3)}.{rng.randint(0, 12)}.{rng.randint(0, 3)}" for i in range(12)}
    for name, version in versions.items():
        _dist(site, name, version)
    cases = []
    for name, version in versions.items():
        for op in (">=", "<=", "==", "!=", ">", "<", "~="):
            bound = f"{rng.randint(0, 3)}.{rng.randint(0, 12)}"
            cases.append((f"{name}{op}{bound}", version in SpecifierSet(f"{op}{bound}")))
    missing = hidden.missing_python([line for line, _ in cases])
    for line, ok in cases:
        assert any(m.startswith(line + " ") for m in missing) is not ok, (line, versions, missing)
    assert all(m.endswith(f" (installed: {versions[re.split('[<>=!~]', m)[0]]})") for m in missing), missing


def test_markers_are_evaluated_for_the_checks_interpreter(venv):
    python, _ = venv
    version = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert hidden.python_reason(["mtl-probe-absent; python_version < '3'"], "t") is None
    assert hidden.python_reason([f"mtl-probe-absent; python_version != '{version}'"], "t") is None
    assert "mtl-probe-absent" in hidden.python_reason([f"mtl-probe-absent; python_version == '{version}'"], "t")


def test_an_extra_needs_what_the_distribution_lists_for_it(venv):
    _, site = venv
    _dist(site, DIST, "2.0", requires=(f"{EXTRA_DEP}>=2; extra == 'fast'",))
    assert hidden.python_reason([DIST], "t") is None  # the extra's dependency is no need without the extra
    assert f"{EXTRA_DEP}>=2 (for an extra)" in hidden.python_reason([f"{DIST}[fast]"], "t")
    _dist(site, EXTRA_DEP, "1.5")
    hidden.forget_probes()
    assert f"{EXTRA_DEP}>=2 (installed: 1.5) (for an extra)" in hidden.python_reason([f"{DIST}[fast]"], "t")


def test_modules_without_metadata_and_unreadable_lines(venv):
    assert hidden.python_reason(["json", "importlib"], "t") is None  # the standard library: modules, no dists
    assert "json>=1 (importable, no version metadata)" in hidden.python_reason(["json>=1"], "t")
    for line in ("git+https://example.invalid/tool.git@abc123", "numpy>=>1", "pkg[", "-e ."):
        reason = hidden.python_reason([line], "the dependencies of p")
        assert reason.startswith(f"cannot check the dependency {line!r}: ") and reason.endswith(
            "(the dependencies of p)"), reason
    assert hidden.requirement_lines("# c\nnumpy>=1 # why\n-r other.txt\n\nscipy\\\n>=1.4\n") == [
        "numpy>=1", "scipy>=1.4"]


def _unrunnable_python(root: Path) -> Path:
    """A python3 first on PATH that the sandbox's commands cannot run: in a directory only we may enter, and that
    bwrap does not bind. It is the real interpreter (a venv of it), with a distribution the others lack."""
    base = interpreter.check_python("local") or interpreter.candidates()[0].executable
    private = root / "private"
    private.mkdir(mode=0o700)
    subprocess.run([base, "-m", "venv", "--without-pip", str(private / "venv")], check=True, capture_output=True,
                   timeout=120)
    [site] = (private / "venv").glob("lib/python3*/site-packages")
    _dist(site, DIST, "1.0")
    return private / "venv" / "bin"


@pytest.mark.parametrize("kind", ["local", "bwrap"])
def test_the_probe_and_the_check_run_the_same_interpreter(kind, monkeypatch, tmp_path):
    if kind == "bwrap" and not BwrapSandbox.is_available():
        pytest.skip("bwrap cannot make a sandbox here")
    if kind == "local" and os.geteuid() != 0:
        pytest.skip("as an ordinary user the local sandbox can run every python3 on PATH")
    root = _world_dir()
    try:
        shim = _unrunnable_python(root)
        monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setattr(hidden, "PROBE_SANDBOX", kind)
        interpreter.clear_cache()
        first = interpreter.candidates()[0].executable
        assert first == str(shim / "python3")  # what the old probe asked
        python = interpreter.check_python(kind)
        assert python is not None and python != first
        reason = hidden.python_reason([DIST], "t")
        assert reason == f"needs Python packages {DIST} in {python} (t)"
        workspace = root / "ws"
        workspace.mkdir(mode=0o755)
        (workspace / "probe.py").write_text(
            "import importlib.metadata as m, sys\nprint(sys.executable)\n"
            f"try:\n    print(m.version({DIST!r}))\nexcept m.PackageNotFoundError:\n    print('absent')\n")
        with make_sandbox(kind, workspace) as sandbox:
            result = sandbox.run(graded_command("python3 probe.py", workspace / "report.jsonl", kind=kind),
                                 timeout=60)
        assert result.exit_code == 0, result.output
        assert result.output.split() == [python, "absent"], result.output
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_checks_python3_is_the_named_interpreter_even_beside_another(monkeypatch):
    """An interpreter whose directory holds a different `python3`: the check still runs the one named."""
    base = interpreter.check_python("local")
    if base is None:
        pytest.skip("no python3 the local sandbox's checks can run")
    root = _world_dir()
    try:
        tools = root / "tools"
        tools.mkdir(mode=0o755)
        (tools / "python3.99").symlink_to(base)  # the interpreter, under a name of its own
        (tools / "python3").write_text("#!/bin/sh\necho not-the-interpreter\nexit 3\n", encoding="utf-8")
        (tools / "python3").chmod(0o755)
        shim = root / "shims"
        shim.mkdir(mode=0o755)
        (shim / "python3").write_text(f"#!/bin/sh\nexec {tools / 'python3.99'} \"$@\"\n", encoding="utf-8")
        (shim / "python3").chmod(0o755 | stat.S_IXOTH)
        monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
        interpreter.clear_cache()
        python = interpreter.check_python("local")
        assert python == str(tools / "python3.99")
        workspace = root / "ws"
        workspace.mkdir(mode=0o755)
        with make_sandbox("local", workspace) as sandbox:
            (workspace / "exe.py").write_text("import sys\nprint(sys.executable)\n")
            result = sandbox.run(graded_command("python3 exe.py", workspace / "r.jsonl", kind="local"), timeout=60)
        assert result.exit_code == 0 and result.output.strip() == python, result.output
    finally:
        shutil.rmtree(root, ignore_errors=True)
