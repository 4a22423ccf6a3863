"""Exercism practice exercises in the polyglot-benchmark layout: ``<lang>/exercises/practice/<name>/``."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

from pydantic import BaseModel

from mtl_graph.bench.suites.base import REFERENCE_KEY, SkippedTask, Suite, SuiteError, sample
from mtl_graph.tasks import Task

DOMAIN = "exercism"
META_DIR = ".meta"


class Toolchain(BaseModel):
    """How to test one language's exercises."""

    tools: list[str]
    """Programs that must be on PATH."""
    check: str
    """Check command; ``{tests}`` is replaced by the exercise's test files."""


TOOLCHAINS: dict[str, Toolchain] = {
    "python": Toolchain(tools=["python3"], check="python3 -m unittest {tests}"),
    "go": Toolchain(tools=["go"], check="go test ./..."),
    "rust": Toolchain(tools=["cargo"], check="cargo test -- --include-ignored"),
    "javascript": Toolchain(tools=["node", "npm"], check="npm install --no-audit --no-fund --silent && npm test"),
    "java": Toolchain(tools=["java"], check="sh ./gradlew test --offline"),
    "cpp": Toolchain(tools=["cmake", "make"], check="cmake -S . -B build -DEXERCISM_RUN_ALL_TESTS=1 && make -C build"),
}

_PROMPT_TAIL = """
####

Use the above instructions to modify the supplied files: {files}
Don't change the names of existing functions or classes, as they may be referenced from other code like \
unit tests. Only use standard libraries, don't suggest installing any packages. Tests: {tests}.
"""


def missing_tools(lang: str) -> str | None:
    """Why a language cannot be tested here, or None when its toolchain is present."""
    chain = TOOLCHAINS.get(lang)
    if chain is None:
        return f"no test command known for language {lang!r}"
    absent = [t for t in chain.tools if shutil.which(t) is None]
    if absent:
        return f"{lang} toolchain not found (needs {', '.join(absent)} on PATH)"
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read ({exc})") from None


def _config(exercise: Path) -> dict[str, list[str]]:
    path = exercise / META_DIR / "config.json"
    if not path.is_file():
        raise SuiteError(f"{exercise}: no {META_DIR}/config.json naming solution and test files")
    try:
        files = json.loads(_read(path)).get("files")
    except (json.JSONDecodeError, AttributeError) as exc:
        raise SuiteError(f"{path}: invalid config ({exc})") from None
    if not isinstance(files, dict) or not files.get("solution") or not files.get("test"):
        raise SuiteError(f"{path}: 'files' must name 'solution' and 'test' files")
    return {k: [str(x) for x in v] for k, v in files.items() if isinstance(v, list)}


def _reference(exercise: Path, files: dict[str, list[str]]) -> dict[str, str]:
    """Example files mapped onto the solution paths they implement (by position, else by file name)."""
    solutions, examples = files["solution"], files.get("example", [])
    if len(solutions) == len(examples):
        pairs = zip(solutions, examples)
    else:
        by_name = {Path(e).name: e for e in examples}
        pairs = ((s, by_name[Path(s).name]) for s in solutions if Path(s).name in by_name)
    return {sol: _read(exercise / ex) for sol, ex in pairs if (exercise / ex).is_file()}


def exercise_task(exercise: Path, lang: str) -> Task:
    docs = exercise / ".docs"
    if not (docs / "instructions.md").is_file():
        raise SuiteError(f"{exercise}: no .docs/instructions.md")
    files = _config(exercise)
    parts = [_read(docs / n) for n in ("introduction.md", "instructions.md", "instructions.append.md")
             if (docs / n).is_file()]
    for rel in files["solution"] + files["test"]:
        if not (exercise / rel).is_file():
            raise SuiteError(f"{exercise}: file named in {META_DIR}/config.json is missing: {rel}")
    tests = " ".join(shlex.quote(t) for t in files["test"])
    instruction = "\n\n".join(p.strip() for p in parts) + _PROMPT_TAIL.format(
        files=", ".join(files["solution"]), tests=", ".join(files["test"]))
    return Task(
        id=f"{DOMAIN}/{lang}/{exercise.name}",
        instruction=instruction,
        domain=DOMAIN,
        source_dir=exercise,
        # The example solution lives in .meta; the copy the agent works in must not contain it.
        setup=f"rm -rf {META_DIR}",
        check=TOOLCHAINS[lang].check.format(tests=tests) if lang in TOOLCHAINS else None,
        check_timeout=300.0 if lang != "python" else 60.0,
        test_files=files["test"],
        metadata={"suite": DOMAIN, "language": lang, "exercise": exercise.name,
                  REFERENCE_KEY: _reference(exercise, files)},
    )


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``exercism:PATH`` where PATH holds ``<lang>/exercises/practice/<name>/`` directories."""
    if not arg:
        raise SuiteError("suite 'exercism' needs a path: exercism:PATH")
    root = Path(arg).expanduser()
    if not root.is_dir():
        raise SuiteError(f"exercism directory not found: {root}")
    exercises = sorted((lang_dir.name, ex) for lang_dir in root.iterdir()
                       for ex in (lang_dir / "exercises" / "practice").glob("*/") if ex.is_dir())
    if not exercises:
        raise SuiteError(f"{root}: no exercises (expected <lang>/exercises/practice/<name>/)")
    runnable, skipped = [], []
    for lang, ex in exercises:
        reason = missing_tools(lang)
        if reason:
            skipped.append(SkippedTask(id=f"{DOMAIN}/{lang}/{ex.name}", reason=reason))
        else:
            runnable.append((lang, ex))
    tasks = [exercise_task(ex, lang) for lang, ex in sample(runnable, limit, seed)]
    return Suite(spec=f"exercism:{arg}", name=DOMAIN, tasks=tasks, skipped=skipped, total=len(exercises))
