"""Exercism practice exercises in the polyglot-benchmark layout: ``<lang>/exercises/practice/<name>/``.

Spec: ``exercism:PATH`` or ``exercism:PATH?languages=python+rust``. Every language is one hold-one-out domain
(``exercism``: the same exercise exists in several languages) and one report column (``Suite.groups``).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from mtl_graph.bench.suites.base import (
    REFERENCE_KEY,
    REFERENCE_UNAVAILABLE_KEY,
    SkippedTask,
    Suite,
    SuiteError,
    sample,
)
from mtl_graph.bench.suites.exercism.languages import LANGUAGES, META_DIR, Exercise, Language
from mtl_graph.core.task import Task

DOMAIN = "exercism"
LANGUAGES_KEY = "languages"
SKIP_TESTS_MARKER = ".skip_tests"
DOCS = (".docs/introduction.md", ".docs/instructions.md", ".docs/instructions.append.md")

_PROMPT_TAIL = """
####

Use the above instructions to modify the supplied files: {files}
Don't change the names of existing functions or classes, as they may be referenced from other code like \
unit tests. Only use standard libraries, don't suggest installing any packages. Tests: {tests}.
"""


class ExerciseError(SuiteError):
    """One exercise cannot be loaded; the suite skips it with this reason."""


def split_languages(value: str) -> list[str]:
    """``python+rust`` or ``python,rust`` -> sorted unique names."""
    return sorted({v.strip().lower() for v in value.replace("+", ",").split(",") if v.strip()})


def parse_arg(arg: str) -> tuple[str, list[str] | None]:
    """``PATH[?languages=a+b]`` -> (PATH, languages or None)."""
    path, sep, query = arg.partition("?")
    if not sep:
        return path, None
    key, _, value = query.partition("=")
    if key.strip() != LANGUAGES_KEY or not split_languages(value):
        raise SuiteError(f"exercism: unknown option {query!r}; the spec is exercism:PATH?languages=python+rust")
    return path, split_languages(value)


def normalize_arg(arg: str) -> str:
    """The same folder and languages always give the same spec (an absolute path, sorted languages)."""
    path, languages = parse_arg(arg)
    resolved = str(Path(path).expanduser().resolve())
    return resolved + (f"?{LANGUAGES_KEY}={'+'.join(languages)}" if languages else "")


def with_languages(arg: str, languages: list[str]) -> str:
    """Add a language filter to an exercism spec's argument (refused when it already has one)."""
    path, existing = parse_arg(arg)
    if existing is not None:
        raise SuiteError(f"exercism:{arg} already names its languages; drop --languages or the spec's filter")
    return f"{path}?{LANGUAGES_KEY}={'+'.join(split_languages(','.join(languages)))}"


def read_exercise(path: Path, language: str) -> Exercise:
    """An exercise's config and files, checked; any problem is an ExerciseError naming the file."""
    config = path / META_DIR / "config.json"
    if not config.is_file():
        raise ExerciseError(f"no {META_DIR}/config.json naming solution and test files")
    try:
        files = json.loads(config.read_text(encoding="utf-8")).get("files")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
        raise ExerciseError(f"{META_DIR}/config.json: invalid config ({exc})") from None
    if not isinstance(files, dict) or not files.get("solution") or not files.get("test"):
        raise ExerciseError(f"{META_DIR}/config.json: 'files' must name 'solution' and 'test' files")
    if not all(isinstance(files.get(k, []), list) for k in ("solution", "test", "example")):
        raise ExerciseError(f"{META_DIR}/config.json: 'solution', 'test' and 'example' must be lists")
    ex = Exercise(path=path, language=language, **{k: [str(x) for x in files.get(k, [])]
                                                   for k in ("solution", "test", "example")})
    outside = [rel for rel in ex.solution + ex.test + ex.example
               if PurePosixPath(rel).is_absolute() or ".." in PurePosixPath(rel).parts]
    if outside:
        raise ExerciseError(f"{META_DIR}/config.json names files outside the exercise: {', '.join(outside)}")
    if not (path / ".docs/instructions.md").is_file():
        raise ExerciseError("no .docs/instructions.md")
    if (path / META_DIR / SKIP_TESTS_MARKER).exists():
        raise ExerciseError(f"the track marks it {META_DIR}/{SKIP_TESTS_MARKER}: its tests are the solution, "
                            "so no test grades it")
    missing = [rel for rel in ex.solution + ex.test if not ex.has(rel)]
    if missing:
        raise ExerciseError(f"files named in {META_DIR}/config.json are missing: {', '.join(missing)}")
    return ex


def exercise_task(ex: Exercise, lang: Language) -> Task:
    """The task of one exercise; unreadable files are an ExerciseError."""
    try:
        parts = [ex.read(doc).strip() for doc in DOCS if ex.has(doc)]
        unusable = lang.reference_problem(ex)
        reference = {} if unusable else lang.reference(ex)
    except (OSError, UnicodeDecodeError) as exc:
        raise ExerciseError(f"cannot read ({exc})") from None
    instruction = "\n\n".join(parts) + _PROMPT_TAIL.format(files=", ".join(ex.solution), tests=", ".join(ex.test))
    fetch = lang.setup(ex)
    return Task(
        id=f"{DOMAIN}/{ex.language}/{ex.name}",
        instruction=instruction,
        domain=DOMAIN,
        source_dir=ex.path,
        # Dependencies first (with network), then the example solution leaves the agent's copy.
        setup=" && ".join(c for c in (fetch, f"rm -rf {META_DIR}") if c),
        setup_network=fetch is not None,
        check=lang.check(ex),
        check_timeout=lang.check_timeout,
        test_files=lang.test_files(ex),
        solution_files=list(ex.solution),
        metadata={"suite": DOMAIN, "language": ex.language, "exercise": ex.name, REFERENCE_KEY: reference,
                  **({REFERENCE_UNAVAILABLE_KEY: unusable} if unusable else {})},
    )


def _discover(root: Path) -> list[tuple[str, Path]]:
    return sorted((lang_dir.name, ex) for lang_dir in root.iterdir() if lang_dir.is_dir()
                  for ex in (lang_dir / "exercises" / "practice").glob("*/") if ex.is_dir())


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``exercism:PATH[?languages=...]`` where PATH holds ``<lang>/exercises/practice/<name>/`` directories."""
    if not arg:
        raise SuiteError("suite 'exercism' needs a path: exercism:PATH")
    path, languages = parse_arg(arg)
    root = Path(path).expanduser()
    if not root.is_dir():
        raise SuiteError(f"exercism directory not found: {root}")
    exercises = _discover(root)
    if not exercises:
        raise SuiteError(f"{root}: no exercises (expected <lang>/exercises/practice/<name>/)")
    if languages is not None:
        found = sorted({lang for lang, _ in exercises})
        unknown = [lang for lang in languages if lang not in found]
        if unknown:
            raise SuiteError(f"{root}: no {', '.join(unknown)} exercises (languages here: {', '.join(found)})")
        exercises = [(lang, ex) for lang, ex in exercises if lang in languages]
    reasons = {lang: LANGUAGES[lang].unavailable() if lang in LANGUAGES else f"no test command known for {lang!r}"
               for lang in dict.fromkeys(lang for lang, _ in exercises)}
    tasks, skipped = [], []
    for lang, path_ in exercises:
        task_id = f"{DOMAIN}/{lang}/{path_.name}"
        try:
            if reasons[lang]:
                raise ExerciseError(reasons[lang])
            ex = read_exercise(path_, lang)
            if problem := LANGUAGES[lang].problem(ex):
                raise ExerciseError(problem)
            tasks.append(exercise_task(ex, LANGUAGES[lang]))
        except ExerciseError as exc:
            skipped.append(SkippedTask(id=task_id, reason=str(exc)))
    picked = sample(tasks, limit, seed)
    return Suite(spec=f"exercism:{arg}", name=DOMAIN, tasks=picked, skipped=skipped, total=len(exercises),
                 groups={t.id: t.metadata["language"] for t in picked})
