"""Task suites: ``load_suite("humaneval" | "exercism:PATH" | "jsonl:PATH" | "dir:PATH" | "swebench[:ARG]")``."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from mtl_graph.bench.suites import dirs, exercism, humaneval, jsonl, swebench
from mtl_graph.bench.suites.base import REFERENCE_KEY, SkippedTask, Suite, SuiteError, sample

Loader = Callable[[str | None, int | None, int], Suite]

SUITES: dict[str, Loader] = {
    "humaneval": humaneval.load,
    "exercism": exercism.load,
    "jsonl": jsonl.load,
    "dir": dirs.load,
    "swebench": swebench.load,
}


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``name`` or ``name:ARG`` -> (name, ARG)."""
    name, sep, arg = spec.strip().partition(":")
    name = name.strip().lower()
    if name not in SUITES:
        raise SuiteError(f"unknown suite {name!r} in {spec!r}; known suites: {', '.join(SUITES)}")
    return name, (arg.strip() or None) if sep else None


def normalize_spec(spec: str) -> str:
    """The canonical form of a spec: a path argument made absolute, so the same folder is the same suite."""
    name, arg = parse_spec(spec)
    if arg is None:
        return name
    if name == "exercism":
        return f"{name}:{exercism.normalize_arg(arg)}"
    path = Path(arg).expanduser()
    return f"{name}:{path.resolve() if path.exists() or name != 'swebench' else arg}"


def filter_languages(specs: list[str], languages: list[str]) -> list[str]:
    """Specs with a language filter added to every exercism suite (the CLI's ``--languages``)."""
    if not languages:
        raise SuiteError("--languages needs at least one language, e.g. python,rust")
    parsed = [parse_spec(spec) for spec in specs]
    if not any(name == "exercism" for name, _ in parsed):
        raise SuiteError("--languages applies to exercism suites, and --suites names none")
    return [f"exercism:{exercism.with_languages(arg, languages)}" if name == "exercism" and arg else spec
            for spec, (name, arg) in zip(specs, parsed)]


def load_suite(spec: str, limit: int | None = None, seed: int = 42) -> Suite:
    """Load one suite and take a seeded sample of ``limit`` tasks; raises SuiteError with a clear reason."""
    name, arg = parse_spec(spec)
    return SUITES[name](arg, limit, seed)


__all__ = ["REFERENCE_KEY", "SUITES", "SkippedTask", "Suite", "SuiteError", "filter_languages", "load_suite",
           "normalize_spec", "parse_spec", "sample"]
