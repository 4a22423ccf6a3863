"""MLGym tasks from an MLGym checkout: ``configs/tasks/*.yaml``, ``configs/datasets/*.yaml``, ``data/<task>/``.

Spec: ``mlgym:PATH``, PATH the checkout's root. A task config names its starter code (copied into the workspace
root, as MLGym does), its datasets (a local ``data_path`` copied into ``data/``), its evaluation script and its
baseline scores. MLGym tasks are open-ended; here a run passes when the evaluation's first baseline metric beats
the untouched starter code, measured beside it over seeded runs, or the recorded baseline where the starter code
yields no score (checks/mlgym.py). A task runs where its evaluation can: a GPU for GPU tasks, the Python packages
its scripts import (MLGym's Docker image installs them), a local copy of its data; else it is skipped with the
reason.

The upstream container's workspace (``/home/agent/workspace``) is the workspace here: absolute paths under it in
the starter code and the description are made relative. A dataset file only the evaluation reads (an answer key)
never enters the workspace: it is a check-only file of the clean room (``Task.check_files``).
"""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from mtl_graph.bench.suites.base import REFERENCE_UNAVAILABLE_KEY, SkippedTask, Suite, SuiteError, sample
from mtl_graph.bench.suites.hidden import TaskSkip, gpu_reason, packed_check, python_reason, requirement_lines, \
    relative_to_container_dir, script, yaml_problem
from mtl_graph.core.task import Task

DOMAIN = "mlgym"
TASKS_DIR = Path("configs/tasks")
CONFIG_DIR = Path("configs")
MODES = {"PythonSubmissionTasks": "python", "CSVSubmissionTasks": "csv", "ModelSubmissionTasks": "model"}
GPU_ENTRYPOINTS = {"LMSubmissionTasks"}
_REQUIRED = ("id", "name", "description", "task_entrypoint", "evaluation_paths")
_LOWER_IS_BETTER = re.compile(r"(?i)loss|error|rmse|mse|mae|perplexity|time|regret")
UPSTREAM_WORKSPACE = "/home/agent/workspace"
"""Where MLGym's container keeps the task's workspace (its evaluation scripts name files under it)."""
SPLITS = ("train_split", "valid_split", "test_split")
EVALUATION_RUNS = 5
"""Seeded evaluations of the submission and of the starter code (checks/mlgym.py RUNS)."""
_IMAGE = "MLGym's Docker image installs them"
_TAIL = ("\n\nWhen you are done, the evaluation script (`{script}`) grades your work: its {metric} must be {direction} "
         "than the untouched starter code's, measured beside yours over several seeded runs by a clear margin, or, "
         "where the starter code yields no score, than the baseline's {baseline}.")


def _yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskSkip(f"cannot read {path.name} ({exc})") from None
    except yaml.YAMLError as exc:
        raise TaskSkip(f"{path.name} is not valid YAML ({yaml_problem(exc)})") from None


def _text_files(source: Path, dest: str, root: Path) -> dict[str, str]:
    """Workspace path -> text of a file or directory copied to dest; TaskSkip for a missing or binary file."""
    if not source.resolve().is_relative_to(root.resolve()):
        raise TaskSkip(f"{source} lies outside the MLGym checkout")
    if not source.exists():
        raise TaskSkip(f"{source.relative_to(root)} is missing")
    pairs = [(dest, source)] if source.is_file() else [
        (f"{dest}/{f.relative_to(source)}", f) for f in sorted(source.rglob("*")) if f.is_file()]
    out = {}
    for rel, f in pairs:
        try:
            out[rel] = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise TaskSkip(f"{f.relative_to(root)} is binary; the workspace holds text files only") from None
    return out


def top_imports(source: str) -> set[str]:
    """The top-level modules a Python source imports (absolute imports; none for a source that does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def imported_modules(sources: dict[str, str], local: set[str]) -> list[str]:
    """Top-level modules the Python sources import, less the standard library and the task's own modules."""
    found = set().union(*(top_imports(text) for rel, text in sources.items() if rel.endswith(".py")))
    return sorted(found - set(sys.stdlib_module_names) - local)


def _datasets(cfg: dict, root: Path) -> tuple[dict[str, str], str, list[str]]:
    """The datasets' files (workspace path -> text), their docs, and the file patterns of their declared splits."""
    files, docs, splits = {}, "", []
    for ref in cfg.get("dataset_configs") or []:
        path = root / CONFIG_DIR / str(ref)
        if not path.is_file():
            raise TaskSkip(f"dataset config {ref} is missing")
        ds = _yaml(path)
        if not isinstance(ds, dict) or not ds.get("name") or not ds.get("data_path"):
            raise TaskSkip(f"dataset config {ref} needs name and data_path")
        if not ds.get("is_local"):
            raise TaskSkip(f"needs dataset {ds['name']} fetched from {ds['data_path']} (not local), and runs have "
                           "no network")
        files.update(_text_files(root / str(ds["data_path"]), "data", root))
        docs += f"{str(ds['name']).upper()}:\n{ds.get('description', '')}\n\n"
        splits += [str(sp["file_regex"]) for sp in (ds.get(k) for k in SPLITS)
                   if isinstance(sp, dict) and sp.get("file_regex")]
    return files, docs, splits


def _named_in_code(sources: list[str]) -> set[str]:
    """The file names the string constants of these Python sources name (a path's last part counts)."""
    names: set[str] = set()
    for text in sources:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        names |= {n.value.rstrip("/").rsplit("/", 1)[-1] for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.strip()}
    return names


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None


def answer_files(data: list[str], evaluation: list[str], given: str, splits: list[str]) -> list[str]:
    """The dataset files that are answers by construction: an evaluation script names them, nothing the agent is
    given (the description, the other starter code) does, and no declared train/valid/test split holds them."""
    named = _named_in_code(evaluation)
    return [rel for rel in data if PurePosixPath(rel).name in named and not _mentions(given, PurePosixPath(rel).name)
            and not any(fnmatch.fnmatch(f"./{rel}", p) or fnmatch.fnmatch(rel, p) for p in splits)]


def evaluation_modules(files: dict[str, str], scripts: list[str], description: str) -> list[str]:
    """The starter modules the evaluation imports that the description never names (an opponent's strategy, a
    solver): the evaluation's own, graded from their pristine copies like the scripts."""
    imported = set().union(*(top_imports(files[rel]) for rel in scripts))
    return sorted(f"{m}.py" for m in imported if f"{m}.py" in files and f"{m}.py" not in scripts
                  and not _mentions(description, f"{m}.py"))


def task_of(path: Path, root: Path) -> Task:
    """The task of one config; TaskSkip says why it cannot run here."""
    cfg = _yaml(path)
    if not isinstance(cfg, dict):
        raise TaskSkip(f"{path.name} must be a mapping")
    if missing := [k for k in _REQUIRED if not cfg.get(k)]:
        raise TaskSkip(f"{path.name} lacks {', '.join(missing)}")
    entry = str(cfg["task_entrypoint"])
    if entry in GPU_ENTRYPOINTS:
        raise TaskSkip(gpu_reason() or f"{entry}: its evaluation runs torchrun across every GPU, which this harness "
                                       "does not run")
    if entry not in MODES:
        raise TaskSkip(f"unknown task_entrypoint {entry!r} (known: {', '.join([*MODES, *GPU_ENTRYPOINTS])})")
    baseline = (cfg.get("baseline_scores") or [None])[0]
    if not isinstance(baseline, dict) or not baseline or not all(
            isinstance(v, (int, float)) for v in baseline.values()):
        raise TaskSkip("no numeric baseline_scores to beat (MLGym would run its baseline script first)")
    data, docs, splits = _datasets(cfg, root)
    starter: dict[str, str] = {}
    for ref in cfg.get("starter_code") or []:
        starter.update(_text_files(root / str(ref), Path(str(ref)).name, root))
    starter = {rel: relative_to_container_dir(text, UPSTREAM_WORKSPACE) for rel, text in starter.items()}
    files = {**data, **starter}
    scripts = [str(p) for p in cfg["evaluation_paths"]]
    if absent := [s for s in scripts if s not in files]:
        raise TaskSkip(f"evaluation script {', '.join(absent)} is not among its starter_code")
    local = {Path(rel).parts[0].removesuffix(".py") for rel in files}
    if cfg.get("use_generic_conda") is False and cfg.get("requirements_path"):
        requirements = root / str(cfg["requirements_path"])
        if reason := python_reason(requirement_lines(requirements.read_text(encoding="utf-8")) if requirements.is_file() else [],
                                    _IMAGE):
            raise TaskSkip(reason)
    if reason := python_reason(imported_modules(files, local), _IMAGE):
        raise TaskSkip(reason)
    metric, score = next(iter(baseline.items()))
    lower = bool(_LOWER_IS_BETTER.search(metric))
    timeout = float(cfg.get("training_timeout") or 1800)
    description = relative_to_container_dir(str(cfg["description"]).replace("{dataset_docs}", docs),
                                            UPSTREAM_WORKSPACE)
    given = description + "\n".join(text for rel, text in starter.items() if rel not in scripts)
    answers = answer_files(sorted(data), [files[s] for s in scripts], given, splits)
    check_only = {rel: files.pop(rel) for rel in answers}
    mode = MODES[entry]
    evaluation_own = evaluation_modules(files, scripts, description) if mode == "python" else []
    tests = [*scripts, *evaluation_own, *(rel for rel in files if rel.startswith("data/"))]
    payload = {"starter": {rel: text for rel, text in files.items() if rel not in tests},
               "keep": [*tests, *check_only]}
    call = f"main({scripts[0]!r}, {mode!r}, {metric!r}, {float(score)!r}, {lower!r}, {timeout!r})"
    check = packed_check(script("mlgym.py"), payload, call)
    return Task(
        id=f"{DOMAIN}/{cfg['id']}",
        instruction=description.strip() + _TAIL.format(script=scripts[0], metric=metric, baseline=score,
                                                       direction="lower" if lower else "higher"),
        domain=DOMAIN,
        files=files,
        check=check.command,
        check_files={**check.check_files, **check_only},
        test_files=tests,
        # the submission's and the starter code's evaluations, each under its own limit
        check_timeout=2 * EVALUATION_RUNS * timeout + 120.0,
        metadata={"suite": DOMAIN, "name": cfg["name"], "entrypoint": entry, "metric": metric,
                  "baseline": float(score), "lower_is_better": lower, "check_only": sorted(check_only),
                  REFERENCE_UNAVAILABLE_KEY: "MLGym tasks have baselines, not reference solutions"},
    )


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``mlgym:PATH``: an MLGym checkout (its configs/tasks/*.yaml)."""
    if not arg:
        raise SuiteError("suite 'mlgym' needs a path: mlgym:PATH (an MLGym checkout)")
    root = Path(arg).expanduser()
    if not (root / TASKS_DIR).is_dir():
        raise SuiteError(f"{root}: not an MLGym checkout (no {TASKS_DIR}/)")
    configs = sorted(p for p in (root / TASKS_DIR).iterdir() if p.suffix in (".yaml", ".yml"))
    if not configs:
        raise SuiteError(f"{root / TASKS_DIR}: no task configs (*.yaml)")
    tasks, skipped = [], []
    for path in configs:
        try:
            tasks.append(task_of(path, root))
        except (TaskSkip, OSError) as exc:
            skipped.append(SkippedTask(id=f"{DOMAIN}/{path.stem}", reason=str(exc)))
    return Suite(spec=f"mlgym:{arg}", name=DOMAIN, tasks=sample(tasks, limit, seed), skipped=skipped,
                 total=len(configs))
