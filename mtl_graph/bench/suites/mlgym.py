"""MLGym tasks from an MLGym checkout: ``configs/tasks/*.yaml``, ``configs/datasets/*.yaml``, ``data/<task>/``.

Spec: ``mlgym:PATH``, PATH the checkout's root. A task config names its starter code (copied into the workspace
root, as MLGym does), its datasets (a local ``data_path`` copied into ``data/``), its evaluation script and its
baseline scores. MLGym tasks are open-ended; here a run passes when the evaluation's first baseline metric beats
the baseline (checks/mlgym.py). A task runs where its evaluation can: a GPU for GPU tasks, the Python packages its
scripts import (MLGym's Docker image installs them), a local copy of its data; else it is skipped with the reason.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from mtl_graph.bench.suites.base import REFERENCE_UNAVAILABLE_KEY, SkippedTask, Suite, SuiteError, sample
from mtl_graph.bench.suites.hidden import TaskSkip, gpu_reason, packed_check, python_reason, script, yaml_problem
from mtl_graph.core.task import Task

DOMAIN = "mlgym"
TASKS_DIR = Path("configs/tasks")
CONFIG_DIR = Path("configs")
MODES = {"PythonSubmissionTasks": "python", "CSVSubmissionTasks": "csv", "ModelSubmissionTasks": "model"}
GPU_ENTRYPOINTS = {"LMSubmissionTasks"}
_REQUIRED = ("id", "name", "description", "task_entrypoint", "evaluation_paths")
_LOWER_IS_BETTER = re.compile(r"(?i)loss|error|rmse|mse|mae|perplexity|time|regret")
_IMAGE = "MLGym's Docker image installs them"
_TAIL = ("\n\nWhen you are done, the evaluation script (`{script}`) grades your work: it must report a {metric} "
         "{direction} than the baseline's {baseline}.")


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


def imported_modules(sources: dict[str, str], local: set[str]) -> list[str]:
    """Top-level modules the Python sources import, less the standard library and the task's own modules."""
    found: set[str] = set()
    for rel, text in sources.items():
        if not rel.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return sorted(found - set(sys.stdlib_module_names) - local)


def _datasets(cfg: dict, root: Path) -> tuple[dict[str, str], str]:
    files, docs = {}, ""
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
    return files, docs


def _requirement_names(path: Path) -> list[str]:
    names = []
    for line in path.read_text(encoding="utf-8").splitlines():
        name = re.split(r"[<>=!~\[; ]", line.strip(), maxsplit=1)[0]
        if name and not name.startswith(("#", "-")):
            names.append(name)
    return names


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
    files, docs = _datasets(cfg, root)
    for ref in cfg.get("starter_code") or []:
        files.update(_text_files(root / str(ref), Path(str(ref)).name, root))
    scripts = [str(p) for p in cfg["evaluation_paths"]]
    if absent := [s for s in scripts if s not in files]:
        raise TaskSkip(f"evaluation script {', '.join(absent)} is not among its starter_code")
    local = {Path(rel).parts[0].removesuffix(".py") for rel in files}
    if cfg.get("use_generic_conda") is False and cfg.get("requirements_path"):
        requirements = root / str(cfg["requirements_path"])
        if reason := python_reason(_requirement_names(requirements) if requirements.is_file() else [], _IMAGE):
            raise TaskSkip(reason)
    if reason := python_reason(imported_modules(files, local), _IMAGE):
        raise TaskSkip(reason)
    metric, score = next(iter(baseline.items()))
    lower = bool(_LOWER_IS_BETTER.search(metric))
    timeout = float(cfg.get("training_timeout") or 1800)
    call = f"main({scripts[0]!r}, {MODES[entry]!r}, {metric!r}, {float(score)!r}, {lower!r}, {timeout!r})"
    description = str(cfg["description"]).replace("{dataset_docs}", docs)
    return Task(
        id=f"{DOMAIN}/{cfg['id']}",
        instruction=description.strip() + _TAIL.format(script=scripts[0], metric=metric, baseline=score,
                                                       direction="lower" if lower else "higher"),
        domain=DOMAIN,
        files=files,
        **packed_check(script("mlgym.py"), None, call).task_fields(),
        test_files=[*scripts, *(rel for rel in files if rel.startswith("data/"))],
        check_timeout=timeout + 120.0,
        metadata={"suite": DOMAIN, "name": cfg["name"], "entrypoint": entry, "metric": metric,
                  "baseline": float(score), "lower_is_better": lower,
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
