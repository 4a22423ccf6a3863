"""How each polyglot track is graded: toolchain, dependency setup, check command, reference mapping, test files.

Every check enables all of a track's tests itself (``xtest``, ``@Disabled``, ``#[ignore]``,
``EXERCISM_RUN_ALL_TESTS``), because the test files are restored from pristine copies right before it runs.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, Field

META_DIR = ".meta"
PROBE_TIMEOUT_S = 20.0
# Debian's junit5 and libassertj-core-java packages install these; they stand in for Gradle (see Java).
JAVA_LIB_DIR = Path("/usr/share/java")
JAVA_JARS = ("junit-platform-console-standalone.jar", "assertj-core.jar", "byte-buddy.jar")
JAVA_BUILT_IN_DEPS = ("org.junit", "org.assertj")
# The sandbox caps address space; a JVM reserves far more than it uses unless told otherwise.
JVM_OPTIONS = "-Xmx768m -XX:ReservedCodeCacheSize=64m -XX:CompressedClassSpaceSize=128m -XX:MaxMetaspaceSize=256m"


class Exercise(BaseModel):
    """One exercise directory and the files its ``.meta/config.json`` names."""

    path: Path
    """The exercise directory (``<lang>/exercises/practice/<name>``)."""
    language: str
    """Track name (the top-level directory)."""
    solution: list[str]
    """Files the solver edits."""
    test: list[str]
    """Test files."""
    example: list[str] = Field(default_factory=list)
    """Reference solution files under .meta."""

    @property
    def name(self) -> str:
        return self.path.name

    def has(self, rel: str) -> bool:
        return (self.path / rel).is_file()

    def read(self, rel: str) -> str:
        return (self.path / rel).read_text(encoding="utf-8")


@functools.cache
def probe(argv: tuple[str, ...]) -> str | None:
    """None when a command succeeds, else its last output line (asked once per process)."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{' '.join(argv)}` did not answer ({exc})"
    if proc.returncode == 0:
        return None
    lines = [line.strip() for line in (proc.stderr + "\n" + proc.stdout).splitlines() if line.strip()]
    return f"`{' '.join(argv)}` failed: {lines[-1] if lines else f'exit code {proc.returncode}'}"


def quoted(paths: list[str]) -> str:
    return " ".join(shlex.quote(p) for p in paths)


def map_examples(ex: Exercise) -> dict[str, str]:
    """Example files mapped onto the solution files they implement: by extension, then position or name.

    ``.meta/example.rs`` -> ``src/lib.rs``; a header-only C++ example fills the header and leaves the stub .cpp.
    """
    pairs: dict[str, str] = {}
    for suffix in dict.fromkeys(PurePosixPath(e).suffix for e in ex.example):
        sols = [s for s in ex.solution if PurePosixPath(s).suffix == suffix]
        exs = [e for e in ex.example if PurePosixPath(e).suffix == suffix]
        if len(sols) == len(exs):
            pairs.update(zip(sols, exs))
        else:
            by_name = {PurePosixPath(e).name: e for e in exs}
            pairs.update({s: by_name[PurePosixPath(s).name] for s in sols if PurePosixPath(s).name in by_name})
    return {sol: ex.read(example) for sol, example in pairs.items() if ex.has(example)}


class Language:
    """One track. Subclasses say what differs; the defaults fit a track graded by one offline command."""

    name = ""
    tools: tuple[str, ...] = ()
    build_files: tuple[str, ...] = ()
    """Files besides the tests that the check depends on (restored before it when the exercise has them)."""
    check_timeout = 300.0

    def unavailable(self) -> str | None:
        """Why this track cannot be graded on this machine, or None."""
        absent = [t for t in self.tools if shutil.which(t) is None]
        return f"{self.name} toolchain not found (needs {', '.join(absent)} on PATH)" if absent else None

    def problem(self, ex: Exercise) -> str | None:
        """Why this one exercise cannot be graded here (e.g. an unreachable dependency), or None."""
        return None

    def setup(self, ex: Exercise) -> str | None:
        """A command fetching the exercise's dependencies; it runs with network, before the agent."""
        return None

    def check(self, ex: Exercise) -> str:
        raise NotImplementedError

    def reference(self, ex: Exercise) -> dict[str, str]:
        return map_examples(ex)

    def reference_problem(self, ex: Exercise) -> str | None:
        """Why the reference solution cannot be checked here (the exercise itself can), or None."""
        return None

    def test_files(self, ex: Exercise) -> list[str]:
        """Tests and build files, but none the solver may edit (Rust's Cargo.toml is a solution file)."""
        build = [f for f in self.build_files if ex.has(f) and f not in ex.solution]
        return list(dict.fromkeys(ex.test + build))


class Python(Language):
    name, tools, check_timeout = "python", ("python3",), 60.0

    def check(self, ex: Exercise) -> str:
        tests = quoted(ex.test)
        return (f"sed -i -E '/^[[:space:]]*@(unittest\\.skip|pytest\\.mark\\.skip)/d' {tests} && "
                f"python3 -m unittest {tests}")


class Go(Language):
    name, tools, build_files = "go", ("go",), ("go.mod", "go.sum")

    def check(self, ex: Exercise) -> str:
        # A newer `go` line in go.mod must not make the toolchain try to download another Go.
        return "GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod go test ./..."


CARGO_EXAMPLE = f"{META_DIR}/Cargo-example.toml"
"""The manifest of the track's example solution, when it needs crates the stub's Cargo.toml does not name."""


def _cargo_dependencies(ex: Exercise, manifest_path: str = "Cargo.toml") -> list[str]:
    try:
        manifest = tomllib.loads(ex.read(manifest_path))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    return sorted({*manifest.get("dependencies", {}), *manifest.get("dev-dependencies", {})})


def _example_only_crates(ex: Exercise) -> list[str]:
    return sorted(set(_cargo_dependencies(ex, CARGO_EXAMPLE)) - set(_cargo_dependencies(ex)))


@functools.cache
def _rust_bin() -> str | None:
    """The directory of the real cargo and rustc: rustup's proxies need a HOME the sandbox does not give."""
    try:
        out = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    sysroot = Path(out.stdout.strip())
    return str(sysroot / "bin") if out.returncode == 0 and (sysroot / "bin" / "cargo").is_file() else None


class Rust(Language):
    name, tools, build_files = "rust", ("cargo", "rustc"), ("Cargo.toml", "Cargo.lock")

    def unavailable(self) -> str | None:
        if reason := super().unavailable():
            return reason
        return None if _rust_bin() else "rust: `rustc --print sysroot` names no directory holding cargo"

    def _env(self) -> str:
        return f"export PATH={shlex.quote(_rust_bin() or '')}:\"$PATH\" && "

    @staticmethod
    def _unreachable(crates: list[str]) -> str | None:
        reason = crates and probe(("cargo", "search", "--limit", "1", crates[0]))
        return f"needs crates {', '.join(crates)} and cargo cannot reach their registry ({reason})" if reason else None

    def problem(self, ex: Exercise) -> str | None:
        return self._unreachable(_cargo_dependencies(ex))

    def reference_problem(self, ex: Exercise) -> str | None:
        reason = self._unreachable(_example_only_crates(ex))
        return f"the reference solution {reason}" if reason else None

    def reference(self, ex: Exercise) -> dict[str, str]:
        extra = {"Cargo.toml": ex.read(CARGO_EXAMPLE)} if _example_only_crates(ex) else {}
        return {**map_examples(ex), **extra}

    def setup(self, ex: Exercise) -> str | None:
        steps = ["cargo fetch"] if _cargo_dependencies(ex) else []
        if _example_only_crates(ex) and not self.reference_problem(ex):
            # Into the workspace's CARGO_HOME, so the offline check can build the reference solution too.
            steps.append(f'd=$(mktemp -d) && cp {CARGO_EXAMPLE} "$d/Cargo.toml" && mkdir "$d/src" && '
                         f'touch "$d/src/lib.rs" && cargo fetch --manifest-path "$d/Cargo.toml"')
        return self._env() + " && ".join(steps) if steps else None

    def check(self, ex: Exercise) -> str:
        return self._env() + "cargo test --offline -- --include-ignored"


def _npm_dependencies(ex: Exercise) -> list[str]:
    try:
        manifest = json.loads(ex.read("package.json"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    return sorted({name for key in ("dependencies", "devDependencies") if isinstance(manifest, dict)
                   for name in manifest.get(key) or {}})


class JavaScript(Language):
    name, tools, check_timeout = "javascript", ("node", "npm"), 600.0
    build_files = ("package.json", "package-lock.json", "babel.config.js", ".npmrc", "jest.config.js")

    def problem(self, ex: Exercise) -> str | None:
        reason = _npm_dependencies(ex) and probe(("npm", "ping"))
        return f"npm cannot reach its registry to install the test dependencies ({reason})" if reason else None

    def setup(self, ex: Exercise) -> str | None:
        return "npm install --no-audit --no-fund --no-progress --loglevel=error" if _npm_dependencies(ex) else None

    def check(self, ex: Exercise) -> str:
        # `test.skip` stays: the track skips those few tests as too slow for any test runner.
        enable = r"s/\bx(test|it|describe)(\.each)?\(/\1\2(/g"
        return f"sed -i -E '{enable}' {quoted(ex.test)} && npm test"


def _gradle_dependencies(ex: Exercise) -> list[str]:
    try:
        text = ex.read("build.gradle")
    except (OSError, UnicodeDecodeError):
        return []
    return re.findall(r"""[iI]mplementation\s*\(?\s*(?:platform\()?["']([^"']+)["']""", text)


class Java(Language):
    """Graded with javac and the JUnit console launcher instead of Gradle.

    The Gradle wrapper downloads Gradle, and Gradle the test libraries, from hosts this machine cannot reach;
    Debian's gradle (4.4) predates JUnit 5 support. Debian ships JUnit 5 and AssertJ as jars, which is all the
    exercises' build files ask for.
    """

    name, tools = "java", ("java", "javac")
    build_files = ("build.gradle", "settings.gradle", "gradle/wrapper/gradle-wrapper.properties")

    def unavailable(self) -> str | None:
        if reason := super().unavailable():
            return reason
        absent = [j for j in JAVA_JARS if not (JAVA_LIB_DIR / j).is_file()]
        if absent:
            return ("java: the Gradle wrapper needs hosts this machine cannot reach, so the tests run with javac "
                    f"and JUnit's console launcher, whose jars are missing ({', '.join(absent)} in {JAVA_LIB_DIR}; "
                    "apt-get install junit5 libassertj-core-java)")
        return None

    def problem(self, ex: Exercise) -> str | None:
        extra = [d for d in _gradle_dependencies(ex) if not d.startswith(JAVA_BUILT_IN_DEPS)]
        return f"needs {', '.join(extra)}, which only Gradle could fetch (unreachable here)" if extra else None

    def reference(self, ex: Exercise) -> dict[str, str]:
        root = ex.path / META_DIR / "src" / "reference" / "java"
        files = sorted(p for p in root.rglob("*.java") if p.is_file()) if root.is_dir() else []
        return {f"src/main/java/{p.relative_to(root).as_posix()}": p.read_text(encoding="utf-8") for p in files}

    def check(self, ex: Exercise) -> str:
        libs = ":".join(str(JAVA_LIB_DIR / j) for j in JAVA_JARS)
        out = "build/mtl-classes"
        cp = f"{out}/main:{out}/test:src/main/resources:src/test/resources:{libs}"
        return " && ".join([
            r"find src/test -name '*.java' -exec sed -i -E 's/@Disabled(\([^)]*\))?//' {} +",
            f"rm -rf {out} && mkdir -p {out}/main {out}/test",
            f"export JAVA_TOOL_OPTIONS='{JVM_OPTIONS}'",
            f"javac -encoding UTF-8 -nowarn -d {out}/main $(find src/main/java -name '*.java')",
            f"javac -encoding UTF-8 -nowarn -d {out}/test -cp {out}/main:{libs} $(find src/test/java -name '*.java')",
            f"java -jar {JAVA_LIB_DIR / JAVA_JARS[0]} -cp {cp} --scan-classpath --fail-if-no-tests "
            "--disable-banner --details=tree",
        ])


class Cpp(Language):
    """CMake names the project, the sources and the test binary after the exercise's folder, so the check
    builds a copy in a folder of that name (the workspace may be called anything)."""

    name, tools = "cpp", ("cmake", "make", "c++")
    build_files = ("CMakeLists.txt", "test/catch.hpp", "test/tests-main.cpp")

    def check(self, ex: Exercise) -> str:
        src = f'"$d"/{shlex.quote(ex.name)}'
        return (f"ulimit -s 2048 && d=$(mktemp -d) && trap 'rm -rf \"$d\"' EXIT && mkdir {src} && cp -R . {src}/ && "
                f'cmake -Wno-dev -S {src} -B "$d"/build -DEXERCISM_RUN_ALL_TESTS=ON >/dev/null && '
                'make -s -C "$d"/build')


LANGUAGES: dict[str, Language] = {lang.name: lang for lang in (Python(), Go(), Rust(), JavaScript(), Java(), Cpp())}
