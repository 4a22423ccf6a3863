"""The exercism suite on every polyglot language this machine can run: the oracle passes, the stub fails.

Each fixture exercise is tiny and in the benchmark's real layout; its stub passes the first test and fails the
one the track disables by default (``@unittest.skip``, ``#[ignore]``, ``xtest``, ``@Disabled``,
``EXERCISM_RUN_ALL_TESTS``), so the no-op run fails only if the check really enables every test.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mtl_graph.bench.records import Condition
from mtl_graph.bench.runners import NoopRunner, OracleRunner
from mtl_graph.bench.suites import SuiteError, filter_languages, load_suite, normalize_spec
from mtl_graph.bench.suites.exercism import read_exercise
from mtl_graph.bench.suites.exercism import languages as langs
from mtl_graph.judging.ground_truth import run_setup
from mtl_graph.sandbox import BwrapSandbox, make_sandbox
from helpers.paths import FIXTURES

POLYGLOT = FIXTURES / "polyglot"
LANGUAGES = ["python", "go", "rust", "javascript", "java", "cpp"]
SANDBOX = "bwrap" if BwrapSandbox.is_available() else "local"


def _suite(lang: str):
    return load_suite(f"exercism:{POLYGLOT}?languages={lang}")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_oracle_passes_and_noop_fails(lang):
    reason = langs.LANGUAGES[lang].unavailable()
    if reason:
        pytest.skip(reason)
    suite = _suite(lang)
    assert [t.id for t in suite.tasks] == [f"exercism/{lang}/two-fer"], suite.skipped
    task = suite.tasks[0]
    oracle = OracleRunner(sandbox=SANDBOX).run(task, Condition(), 0, None)
    assert oracle.error is None and oracle.passed, oracle.verdict and oracle.verdict.reason
    noop = NoopRunner(sandbox=SANDBOX).run(task, Condition(), 0, None)
    assert noop.error is None and not noop.passed


def test_reference_files_map_onto_the_solution_layout():
    tasks = {t.metadata["language"]: t for t in load_suite(f"exercism:{POLYGLOT}").tasks}
    mapped = {lang: sorted(t.metadata["reference_files"]) for lang, t in tasks.items()}
    expected = {"python": ["two_fer.py"], "go": ["two_fer.go"], "rust": ["src/lib.rs"],
                "javascript": ["two-fer.js"], "java": ["src/main/java/TwoFer.java"], "cpp": ["two_fer.h"]}
    assert mapped == {lang: files for lang, files in expected.items() if lang in mapped}


def test_test_files_name_tests_and_the_build_files_the_check_reads():
    tasks = {t.metadata["language"]: t for t in load_suite(f"exercism:{POLYGLOT}").tasks}
    expected = {"python": ["two_fer_test.py"], "go": ["two_fer_test.go", "go.mod"],
                "rust": ["tests/two-fer.rs"], "javascript": ["two-fer.spec.js", "package.json"],
                "java": ["src/test/java/TwoFerTest.java", "build.gradle"],
                "cpp": ["two_fer_test.cpp", "CMakeLists.txt"]}
    for lang, task in tasks.items():  # Rust's Cargo.toml is the solver's to edit (a solution file)
        assert task.test_files == expected[lang]
        assert all((POLYGLOT / lang / "exercises/practice/two-fer" / f).is_file() for f in task.test_files)


def test_cpp_check_builds_whatever_the_workspace_is_called(tmp_path):
    if reason := langs.LANGUAGES["cpp"].unavailable():
        pytest.skip(reason)
    task = _suite("cpp").tasks[0]
    from mtl_graph.judging.ground_truth import run_check

    # CMake takes its file names from the folder: built in place, "workspace_test.cpp" would be missing.
    workspace = task.materialize(tmp_path / "workspace")
    for path, content in task.metadata["reference_files"].items():
        (workspace / path).write_text(content)
    assert run_check(task, workspace, lambda room: make_sandbox(SANDBOX, room)).status == "pass"


def test_language_filter_in_the_spec_and_from_the_cli():
    assert {t.metadata["language"] for t in load_suite(f"exercism:{POLYGLOT}?languages=python+go").tasks} <= {
        "python", "go"}
    assert filter_languages([f"exercism:{POLYGLOT}", "humaneval"], ["rust", "python"]) == [
        f"exercism:{POLYGLOT}?languages=python+rust", "humaneval"]
    with pytest.raises(SuiteError, match="no cobol exercises"):
        load_suite(f"exercism:{POLYGLOT}?languages=cobol")
    with pytest.raises(SuiteError, match="unknown option"):
        load_suite(f"exercism:{POLYGLOT}?langs=python")
    with pytest.raises(SuiteError, match="names none"):
        filter_languages(["humaneval"], ["python"])
    with pytest.raises(SuiteError, match="already names its languages"):
        filter_languages([f"exercism:{POLYGLOT}?languages=go"], ["python"])


def test_specs_normalise_paths_and_language_order(monkeypatch):
    monkeypatch.chdir(POLYGLOT.parent)
    assert normalize_spec("exercism:polyglot?languages=rust,python") == normalize_spec(
        f"exercism:{POLYGLOT}?languages=python+rust") == f"exercism:{POLYGLOT.resolve()}?languages=python+rust"
    assert normalize_spec("swebench:princeton-nlp/SWE-bench_Lite") == "swebench:princeton-nlp/SWE-bench_Lite"


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "ex"
    shutil.copytree(POLYGLOT / "python", root / "python")
    for name in ("leap", "word-count"):
        shutil.copytree(POLYGLOT / "python/exercises/practice/two-fer", root / f"python/exercises/practice/{name}")
    return root


@pytest.mark.parametrize("breakage, reason", [
    (lambda ex: (ex / ".meta/config.json").write_text("{broken"), ".meta/config.json: invalid config"),
    (lambda ex: (ex / ".meta/config.json").write_text('{"files": {"solution": ["two_fer.py"]}}'),
     "must name 'solution' and 'test'"),
    (lambda ex: (ex / ".meta/config.json").write_text('{"files": {"solution": "x.py", "test": "t.py"}}'),
     "must be lists"),
    (lambda ex: (ex / ".meta/config.json").write_bytes(b"\xff\xfe{"), "invalid config"),
    (lambda ex: (ex / ".meta/config.json").unlink(), "no .meta/config.json"),
    (lambda ex: (ex / ".docs/instructions.md").unlink(), "no .docs/instructions.md"),
    (lambda ex: (ex / ".meta/.skip_tests").touch(), "its tests are the solution"),
    (lambda ex: (ex / "two_fer_test.py").unlink(), "missing: two_fer_test.py"),
    (lambda ex: (ex / ".meta/config.json").write_text(
        '{"files": {"solution": ["two_fer.py"], "test": ["../../../../../../etc/passwd"]}}'), "outside the exercise"),
])
def test_one_broken_exercise_is_skipped_with_its_reason(tmp_path, breakage, reason):
    root = _copy(tmp_path)
    breakage(root / "python/exercises/practice/leap")
    suite = load_suite(f"exercism:{root}")
    assert [t.id for t in suite.tasks] == ["exercism/python/two-fer", "exercism/python/word-count"]
    assert [s.id for s in suite.skipped] == ["exercism/python/leap"]
    assert reason in suite.skipped[0].reason and suite.total == 3


def test_missing_toolchain_and_unreachable_dependencies_are_skips(tmp_path, monkeypatch):
    monkeypatch.setattr(langs.shutil, "which", lambda tool: None if tool == "cargo" else "/usr/bin/" + tool)
    suite = load_suite(f"exercism:{POLYGLOT}?languages=rust")
    assert suite.tasks == [] and suite.skipped[0].reason == "rust toolchain not found (needs cargo on PATH)"
    monkeypatch.undo()
    if langs.LANGUAGES["javascript"].unavailable():
        pytest.skip("no node here")
    root = tmp_path / "ex"
    shutil.copytree(POLYGLOT / "javascript", root / "javascript")
    ex = root / "javascript/exercises/practice/two-fer"
    (ex / "package.json").write_text('{"name": "t", "devDependencies": {"jest": "^29.7.0"}}')
    monkeypatch.setattr(langs, "probe", lambda argv: "`npm ping` failed: ENOTFOUND")
    suite = load_suite(f"exercism:{root}")
    assert suite.tasks == []
    assert suite.skipped[0].reason == "npm cannot reach its registry to install the test dependencies " \
                                      "(`npm ping` failed: ENOTFOUND)"
    monkeypatch.setattr(langs, "probe", lambda argv: None)
    task = load_suite(f"exercism:{root}").tasks[0]
    assert task.setup_network and task.setup.startswith("npm install") and task.setup.endswith("rm -rf .meta")


@pytest.mark.parametrize("jars", [True, False], ids=["with-jars", "without-jars"])
def test_java_exercise_needing_another_library_is_skipped(tmp_path, monkeypatch, jars):
    # Debian's jars may or may not be installed here: both machines are made, so both hold on any machine.
    lib = tmp_path / "lib"
    lib.mkdir()
    for jar in langs.JAVA_JARS if jars else ():
        (lib / jar).touch()
    monkeypatch.setattr(langs, "JAVA_LIB_DIR", lib)
    root = tmp_path / "ex"
    shutil.copytree(POLYGLOT / "java", root / "java")
    gradle = root / "java/exercises/practice/two-fer/build.gradle"
    extra = 'dependencies {\n    implementation "org.json:json:20190722"'
    gradle.write_text(gradle.read_text().replace("dependencies {", extra))
    java = langs.LANGUAGES["java"]
    # The build file alone decides this, so it holds without javac or the jars too.
    assert java.problem(read_exercise(gradle.parent, "java")).startswith("needs org.json:json:20190722")
    suite = load_suite(f"exercism:{root}")
    track = java.unavailable()  # None only where javac is on PATH and the jars are there
    if track is None:
        assert jars
        expected = "needs org.json:json:20190722"
    else:  # a machine that cannot grade Java at all skips the track for that reason, with a way to fix it
        assert "toolchain not found" in track or (not jars and "jars are missing" in track), track
        expected = track
    assert suite.tasks == [] and suite.skipped[0].reason.startswith(expected), suite.skipped


def test_setup_with_network_runs_in_a_networked_twin(tmp_path):
    if SANDBOX != "bwrap":
        pytest.skip("bwrap is not usable here")
    task = _suite("python").tasks[0].model_copy(update={
        "setup": "grep -c : /proc/net/dev > links; rm -rf .meta", "setup_network": True})
    sandbox = make_sandbox("bwrap", task.materialize(tmp_path / "ws"))
    run_setup(task, sandbox)
    with_net = int((tmp_path / "ws/links").read_text())
    sandbox.run("grep -c : /proc/net/dev > links")
    assert int((tmp_path / "ws/links").read_text()) == 1 and not (tmp_path / "ws/.meta").exists()  # lo only
    assert with_net > 1  # the host's interfaces were visible to the setup step only


def test_setup_needing_network_in_a_sandbox_that_cannot_grant_it_fails_clearly(tmp_path):
    from mtl_graph.judging.ground_truth import SetupFailed

    class Plain:  # a Sandbox of someone else's making: no kind, no config
        workspace = tmp_path

        def run(self, command, timeout=None):
            raise AssertionError("the setup must not run without the network it asked for")

    task = _suite("python").tasks[0].model_copy(update={"setup_network": True})
    with pytest.raises(SetupFailed, match="needs the network, and Plain cannot grant it"):
        run_setup(task, Plain())


def test_rust_reference_needing_unreachable_crates_is_an_explained_error(tmp_path, monkeypatch):
    if langs.LANGUAGES["rust"].unavailable():
        pytest.skip(langs.LANGUAGES["rust"].unavailable())
    root = tmp_path / "ex"
    shutil.copytree(POLYGLOT / "rust", root / "rust")
    ex = root / "rust/exercises/practice/two-fer"
    manifest = (ex / "Cargo.toml").read_text() + '\n[dependencies]\nitertools = "0.5"\n'
    (ex / ".meta/Cargo-example.toml").write_text(manifest)
    monkeypatch.setattr(langs, "probe", lambda argv: "`cargo search` failed: could not resolve host")
    task = load_suite(f"exercism:{root}").tasks[0]  # the exercise itself needs no crate: it stays
    assert task.metadata["reference_files"] == {} and task.setup == "rm -rf .meta"
    outcome = OracleRunner(sandbox="local").run(task, Condition(), 0, None)
    assert outcome.error == ("task exercism/rust/two-fer: the reference solution needs crates itertools and cargo "
                             "cannot reach their registry (`cargo search` failed: could not resolve host)")
    monkeypatch.setattr(langs, "probe", lambda argv: None)
    task = load_suite(f"exercism:{root}").tasks[0]
    assert task.metadata["reference_files"]["Cargo.toml"] == manifest and task.setup_network
    assert 'cargo fetch --manifest-path "$d/Cargo.toml"' in task.setup and task.setup.endswith("rm -rf .meta")
